/**
 * A finished transaction's journal record waits for its call's answer to leave: a Runner killed
 * in between leaves it to recovery, which reports the call completed under its call id; an
 * answer lost on its connection is listed as that outcome at once.
 */
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "node:test";
import { withCall } from "../call-context.js";
import { createEditJournal, type EditJournal } from "./edit-journal.js";
import type { Workspace } from "./types.js";
import { revisionOf, tempDir, writeTree } from "./workspace.test-support.js";
import { createWorkspace, recentRecoveries } from "./workspace.js";

type Fate = "sent" | "lost";

/** A workspace whose journal defers to answers the test sends or loses by hand, in call order. */
async function answering(): Promise<{ root: string; stateDir: string; ws: Workspace; journal: EditJournal; answers: Array<(fate: Fate) => void> }> {
  const root = await tempDir();
  const stateDir = await tempDir();
  await writeTree(root, { "a.txt": "alpha\n", "b.txt": "beta\n" });
  const answers: Array<(fate: Fate) => void> = [];
  const journal = createEditJournal({
    dir: stateDir,
    afterAnswer: (then) => {
      answers.push(then);
      return true;
    },
  });
  await journal.recover();
  const ws = createWorkspace({ root, journal: { journal, recovery: Promise.resolve(true) } });
  return { root, stateDir, ws, journal, answers };
}

async function replace(ws: Workspace, file: string, from: string, to: string, callId: string): Promise<void> {
  const revision = await revisionOf(ws, file);
  await withCall(callId, () =>
    ws.editProjectFiles({
      changes: [{ kind: "edit", path: file, expected_read_revision: revision, edits: [{ replace_exact: { old_text: from, new_text: to } }] }],
    }),
  );
}

const open = async (stateDir: string) => readdir(path.join(stateDir, "transactions"));

describe("edit journal: a finished transaction and its answer", () => {
  it("killed after the edit but before its answer left: recovery reports the call completed; once sent, the record is gone", async () => {
    const w = await answering();
    await replace(w.ws, "a.txt", "alpha", "ALPHA", "call-1");
    assert.equal((await open(w.stateDir)).length, 1, "the record waits for the answer");
    // The process dies here: a new process's recovery finds the record.
    const restarted = createEditJournal({ dir: w.stateDir });
    const recovered = await restarted.recover();
    assert.deepEqual(
      recovered.map((t) => [t.call_id, t.outcome, t.paths]),
      [["call-1", "completed", ["a.txt"]]],
    );
    assert.equal(await readFile(path.join(w.root, "a.txt"), "utf8"), "ALPHA\n");

    const sent = await answering();
    await replace(sent.ws, "a.txt", "alpha", "ALPHA", "call-2");
    sent.answers[0]?.("sent");
    await sent.journal.settled();
    assert.deepEqual(await open(sent.stateDir), [], "forgotten once the answer left");
    assert.deepEqual(await createEditJournal({ dir: sent.stateDir }).recover(), [], "nothing for recovery");
  });

  it("an answer lost on its connection is listed at once as the call's outcome", async () => {
    const w = await answering();
    await replace(w.ws, "a.txt", "alpha", "ALPHA", "call-lost");
    w.answers[0]?.("lost");
    await w.journal.settled();
    assert.deepEqual(await open(w.stateDir), []);
    assert.deepEqual(
      (await w.journal.recovered()).map((t) => [t.call_id, t.outcome]),
      [["call-lost", "completed"]],
    );
    assert.deepEqual(
      recentRecoveries(await w.journal.recovered(), Date.now()).map((t) => [t.call_id, t.outcome]),
      [["call-lost", "completed"]],
      "read_workspace_changes lists it under recovered_writes",
    );
  });

  it("a later edit of the same file forgets the earlier record first, so recovery never puts back an older image", async () => {
    const w = await answering();
    await replace(w.ws, "a.txt", "alpha", "one", "call-1");
    await replace(w.ws, "b.txt", "beta", "BETA", "call-2");
    assert.equal((await open(w.stateDir)).length, 2, "an edit of another file leaves the first record alone");
    await replace(w.ws, "a.txt", "one", "two", "call-3");
    w.answers[2]?.("sent");
    await w.journal.settled();
    // call-1's answer never left, but call-3 moved a.txt on: only call-2's record is left.
    const recovered = await createEditJournal({ dir: w.stateDir }).recover();
    assert.deepEqual(
      recovered.map((t) => t.call_id),
      ["call-2"],
    );
    assert.equal(await readFile(path.join(w.root, "a.txt"), "utf8"), "two\n");
    assert.equal(await readFile(path.join(w.root, "b.txt"), "utf8"), "BETA\n");
  });
});
