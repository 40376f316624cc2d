import assert from "node:assert/strict";
import { lstat, mkdir, readdir, readFile, readlink, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "node:test";
import { createEditJournal, type EditJournal } from "./edit-journal.js";
import { ReasonCode } from "@webcodex/contracts";
import { expectFailure, revisionOf, tempDir, writeTree } from "./workspace.test-support.js";
import { createWorkspace, recentRecoveries } from "./workspace.js";
import { withCall } from "../call-context.js";
import type { FileChange, Workspace, WorkspaceHooks } from "./types.js";

/** Every entry under root: files as text, symlinks as "-> target", directories as "/". */
async function snapshot(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (dir: string): Promise<void> => {
    for (const name of (await readdir(dir)).sort()) {
      const full = path.join(dir, name);
      const rel = path.relative(root, full);
      const info = await lstat(full);
      if (info.isSymbolicLink()) out[rel] = `-> ${await readlink(full)}`;
      else if (info.isDirectory()) {
        out[rel] = "/";
        await walk(full);
      } else out[rel] = `${(info.mode & 0o777).toString(8)}:${await readFile(full, "utf8")}`;
    }
  };
  await walk(root);
  return out;
}

const BEFORE = { "a.txt": "alpha\n", "c.txt": "gamma\n", "d.txt": "delta\n", "keep.txt": "keep\n" };

/** A transaction of every kind: edit, create (with a new directory), delete, move (into a new directory). */
async function changes(ws: Workspace): Promise<FileChange[]> {
  return [
    {
      kind: "edit",
      path: "a.txt",
      expected_read_revision: await revisionOf(ws, "a.txt"),
      edits: [{ replace_exact: { old_text: "alpha", new_text: "ALPHA" } }],
    },
    { kind: "create", path: "new/dir/b.txt", content: "beta\n" },
    { kind: "delete", path: "c.txt", expected_read_revision: await revisionOf(ws, "c.txt") },
    { kind: "move", path: "d.txt", destination: "moved/d.txt", expected_read_revision: await revisionOf(ws, "d.txt") },
  ];
}

interface Crashable {
  root: string;
  stateDir: string;
  ws: Workspace;
  /** Resolves when the transaction reached its crash point (and froze there). */
  reached: Promise<void>;
}

/** A workspace whose transaction freezes forever at `crashAt` — the state a SIGKILL there leaves. */
async function crashable(crashAt: { step?: string; afterFile?: number }): Promise<Crashable> {
  const root = await tempDir();
  const stateDir = await tempDir();
  await writeTree(root, BEFORE);
  let signal = () => undefined as void;
  const reached = new Promise<void>((resolve) => (signal = resolve));
  const freeze = () => {
    signal();
    return new Promise<never>(() => undefined);
  };
  const journal = createEditJournal({ dir: stateDir, onStep: (step) => (step === crashAt.step ? freeze() : undefined) });
  const hooks: WorkspaceHooks = { afterFileApplied: (_p, index) => (index === crashAt.afterFile ? freeze() : undefined) };
  const ws = createWorkspace({ root, hooks, journal: { journal, recovery: Promise.resolve(true) } });
  return { root, stateDir, ws, reached };
}

/** Starts the transaction, waits until it froze (no more progress), then "restarts": a fresh journal recovers. */
async function crashAndRecover(
  c: Crashable,
  run: () => Promise<unknown>,
): Promise<{ journal: EditJournal; recovered: Awaited<ReturnType<EditJournal["recover"]>> }> {
  let settled = false;
  void run().then(
    () => (settled = true),
    () => (settled = true),
  );
  await c.reached;
  assert.equal(settled, false, "the transaction is frozen at the crash point");
  const journal = createEditJournal({ dir: c.stateDir });
  return { journal, recovered: await journal.recover() };
}

const AFTER = {
  "a.txt": "644:ALPHA\n",
  "keep.txt": "644:keep\n",
  new: "/",
  "new/dir": "/",
  "new/dir/b.txt": "644:beta\n",
  moved: "/",
  "moved/d.txt": "644:delta\n",
};

describe("edit journal: recovery from each crash point", () => {
  it("a crash before the intent is durable leaves the workspace untouched and records nothing", async () => {
    const c = await crashable({ step: "intent_written" });
    const before = await snapshot(c.root);
    const { journal, recovered } = await crashAndRecover(c, async () => c.ws.editProjectFiles({ changes: await changes(c.ws) }));
    assert.deepEqual(recovered, []);
    assert.deepEqual(await snapshot(c.root), before);
    assert.deepEqual(await journal.recovered(), []);
    assert.deepEqual(await readdir(path.join(c.stateDir, "transactions")), [], "the partial intent is discarded");
  });

  it("a crash after the intent, before the first write, is rolled back (a no-op) and recorded", async () => {
    const c = await crashable({ step: "intent_durable" });
    const before = await snapshot(c.root);
    const { recovered } = await crashAndRecover(c, async () => c.ws.editProjectFiles({ changes: await changes(c.ws) }));
    assert.equal(recovered.length, 1);
    assert.equal(recovered[0]?.outcome, "rolled_back");
    assert.deepEqual(await snapshot(c.root), before);
  });

  for (const index of [0, 1, 2, 3]) {
    it(`a crash after change ${index} reached the disk is rolled back to every before-image, created directories and temp files removed`, async () => {
      const c = await crashable({ afterFile: index });
      const before = await snapshot(c.root);
      const { journal, recovered } = await crashAndRecover(c, async () => c.ws.editProjectFiles({ changes: await changes(c.ws) }));
      assert.equal(recovered.length, 1);
      assert.equal(recovered[0]?.outcome, "rolled_back");
      assert.equal(recovered[0]?.tool, "edit_project_files");
      assert.deepEqual(recovered[0]?.paths, ["a.txt", "new/dir/b.txt", "c.txt", "d.txt", "moved/d.txt"]);
      assert.deepEqual(await snapshot(c.root), before);
      assert.deepEqual(
        (await journal.recovered()).map((t) => t.transaction_id),
        [recovered[0]?.transaction_id],
      );
      assert.deepEqual(await readdir(path.join(c.stateDir, "transactions")), []);
    });
  }

  it("the recovered outcome names the call that ran the transaction (the id the caller's outcome_unknown failure carries)", async () => {
    const c = await crashable({ afterFile: 1 });
    const { recovered } = await crashAndRecover(c, () => withCall("call-123", async () => c.ws.editProjectFiles({ changes: await changes(c.ws) })));
    assert.equal(recovered[0]?.call_id, "call-123");
    assert.equal(recovered[0]?.outcome, "rolled_back");
  });

  it("read_workspace_changes lists recent recoveries as recovered_writes: last 24 hours, newest first, at most 5, paths capped", () => {
    const now = Date.parse("2026-01-02T12:00:00Z");
    const at = (minutesAgo: number) => new Date(now - minutesAgo * 60_000).toISOString();
    const t = (id: string, minutesAgo: number, paths = ["a.txt"]) => ({
      transaction_id: id,
      call_id: `c-${id}`,
      tool: "edit_project_files" as const,
      outcome: "completed" as const,
      paths,
      started_at: at(minutesAgo + 1),
      recovered_at: at(minutesAgo),
    });
    const listed = recentRecoveries(
      [
        t("old", 25 * 60),
        t("1", 50),
        t("2", 40),
        t("3", 30),
        t("4", 20),
        t("5", 10),
        t(
          "6",
          5,
          Array.from({ length: 30 }, (_, i) => `f${i}`),
        ),
      ],
      now,
    );
    assert.deepEqual(
      listed.map((w) => w.call_id),
      ["c-6", "c-5", "c-4", "c-3", "c-2"],
    );
    assert.equal(listed[0]?.paths.length, 20);
    assert.equal(listed[0]?.paths_truncated, true);
    assert.equal(listed[1]?.paths_truncated, undefined);
    assert.deepEqual(recentRecoveries([t("old", 25 * 60)], now), []);
  });

  it("a crash after the commit point is completed: every after-image is in place, no temp file left", async () => {
    const c = await crashable({ step: "committed" });
    const { recovered } = await crashAndRecover(c, async () => c.ws.editProjectFiles({ changes: await changes(c.ws) }));
    assert.equal(recovered[0]?.outcome, "completed");
    assert.deepEqual(await snapshot(c.root), AFTER);
  });

  it("a record torn while being forgotten (its commit marker already removed) is never rolled back", async () => {
    const c = await crashable({ step: "committed" });
    let settled = false;
    void (async () => c.ws.editProjectFiles({ changes: await changes(c.ws) }))().finally(() => (settled = true));
    await c.reached;
    assert.equal(settled, false);
    const { rename, rm } = await import("node:fs/promises");
    const [id] = await readdir(path.join(c.stateDir, "transactions"));
    const record = path.join(c.stateDir, "transactions", id as string);
    // done() renames first; a crash during the removal after it leaves this.
    await rename(record, record + ".done");
    await rm(path.join(record + ".done", "committed"));
    assert.deepEqual(await createEditJournal({ dir: c.stateDir }).recover(), []);
    // (The deleted file's backup is removed before done() in a real run; this freeze stopped earlier.)
    const after = Object.fromEntries(Object.entries(await snapshot(c.root)).filter(([p]) => !p.startsWith(".wc-del-")));
    assert.deepEqual(after, AFTER);
    assert.deepEqual(await readdir(path.join(c.stateDir, "transactions")), []);
  });

  it("recovery is idempotent: a second start finds nothing to do", async () => {
    const c = await crashable({ afterFile: 2 });
    await crashAndRecover(c, async () => c.ws.editProjectFiles({ changes: await changes(c.ws) }));
    const again = createEditJournal({ dir: c.stateDir });
    assert.deepEqual(await again.recover(), []);
    assert.equal((await again.recovered()).length, 1, "the earlier outcome stays listed");
  });

  it("restores a deleted symbolic link as a link, and a file's mode", async () => {
    const c = await crashable({ afterFile: 1 });
    await symlink("keep.txt", path.join(c.root, "link"));
    const { chmod } = await import("node:fs/promises");
    await chmod(path.join(c.root, "a.txt"), 0o755);
    const before = await snapshot(c.root);
    await crashAndRecover(c, async () =>
      c.ws.editProjectFiles({
        changes: [
          {
            kind: "edit",
            path: "a.txt",
            expected_read_revision: await revisionOf(c.ws, "a.txt"),
            edits: [{ replace_exact: { old_text: "alpha", new_text: "x" } }],
          },
          { kind: "delete", path: "link", expected_read_revision: await revisionOf(c.ws, "keep.txt") },
        ],
      }),
    );
    assert.deepEqual(await snapshot(c.root), before);
  });

  it("import_host_files uses the same journal: a crash mid-import is rolled back", async () => {
    const c = await crashable({ afterFile: 1 });
    const before = await snapshot(c.root);
    const { recovered } = await crashAndRecover(c, async () =>
      c.ws.importHostFiles({
        files: [
          { path: "keep.txt", content: "replaced\n", overwrite: true, expected_read_revision: await revisionOf(c.ws, "keep.txt") },
          { path: "host/new.bin", content_base64: Buffer.from([0, 1, 2, 3]).toString("base64") },
          { path: "host/other.txt", content: "x" },
        ],
      }),
    );
    assert.equal(recovered[0]?.tool, "import_host_files");
    assert.equal(recovered[0]?.outcome, "rolled_back");
    assert.deepEqual(await snapshot(c.root), before);
  });

  it("a finished transaction leaves no journal record and nothing in the workspace but its changes", async () => {
    const c = await crashable({});
    await c.ws.editProjectFiles({ changes: await changes(c.ws) });
    assert.deepEqual(await snapshot(c.root), AFTER);
    assert.deepEqual(await readdir(path.join(c.stateDir, "transactions")), []);
    assert.deepEqual(await createEditJournal({ dir: c.stateDir }).recover(), []);
  });

  it("a journal that cannot record the intent refuses the transaction before any write (apply_failed, journal_unavailable)", async () => {
    const root = await tempDir();
    const stateDir = await tempDir();
    await writeTree(root, BEFORE);
    const journal = createEditJournal({ dir: stateDir });
    await journal.recover();
    const { rm: remove, writeFile: write } = await import("node:fs/promises");
    await remove(path.join(stateDir, "transactions"), { recursive: true });
    await write(path.join(stateDir, "transactions"), "not a directory");
    const ws = createWorkspace({ root, journal: { journal, recovery: Promise.resolve(true) } });
    const before = await snapshot(root);
    const failure = await expectFailure(ws.editProjectFiles({ changes: await changes(ws) }), ReasonCode.applyFailed);
    assert.equal(failure.detail_code, "journal_unavailable");
    assert.equal(failure.state_changed, false);
    assert.deepEqual(await snapshot(root), before);
  });

  it("an in-process failure rolls back and forgets the intent (nothing for recovery to redo later)", async () => {
    const root = await tempDir();
    const stateDir = await tempDir();
    await writeTree(root, BEFORE);
    const journal = createEditJournal({ dir: stateDir });
    const ws = createWorkspace({
      root,
      journal: { journal, recovery: Promise.resolve(true) },
      hooks: {
        afterFileApplied: (_p, i) => {
          if (i === 2) throw new Error("disk full");
        },
      },
    });
    const before = await snapshot(root);
    await assert.rejects(ws.editProjectFiles({ changes: await changes(ws) }));
    assert.deepEqual(await snapshot(root), before);
    assert.deepEqual(await readdir(path.join(stateDir, "transactions")), []);
  });
});

describe("records recovery does not trust", () => {
  /** A committed transaction left unfinished (a crash after its commit point), then the journal reopened. */
  async function leftRecord(root: string, stateDir: string): Promise<string> {
    const journal = createEditJournal({ dir: stateDir, workspaceRoot: root });
    const tx = await journal.begin("edit_project_files", [
      { rel: "a.txt", target: path.join(root, "a.txt"), before: { absent: true }, after: { bytes: Buffer.from("from journal\n") } },
    ]);
    await tx.commit();
    const txDir = path.join(stateDir, "transactions");
    const [name] = await readdir(txDir);
    return path.join(txDir, name!, "intent.json");
  }

  it("a record retargeted outside the workspace root, or planted without the journal's key, is never replayed", async () => {
    const root = await tempDir();
    const stateDir = await tempDir();
    const outside = await tempDir();
    const intent = await leftRecord(root, stateDir);
    const record = JSON.parse(await readFile(intent, "utf8")) as { entries: Array<{ target: string }>; mac: string };
    // Retargeted: the MAC no longer matches, and the target is outside the root anyway.
    record.entries[0]!.target = path.join(outside, "victim.txt");
    await writeFile(intent, JSON.stringify(record));
    // Planted: a copy without any MAC.
    const planted = path.join(path.dirname(path.dirname(intent)), "0000-planted");
    await mkdir(planted);
    await writeFile(path.join(planted, "intent.json"), JSON.stringify({ ...record, id: "0000-planted", mac: undefined }));
    await writeFile(path.join(planted, "committed"), "");
    const recovered = await createEditJournal({ dir: stateDir, workspaceRoot: root }).recover();
    assert.deepEqual(recovered, []);
    assert.deepEqual(await readdir(outside), [], "nothing was installed outside the workspace");
    assert.deepEqual(await readdir(path.join(stateDir, "transactions")), [], "both records were discarded");
  });

  it("a record the journal wrote is still replayed", async () => {
    const root = await tempDir();
    const stateDir = await tempDir();
    await leftRecord(root, stateDir);
    const recovered = await createEditJournal({ dir: stateDir, workspaceRoot: root }).recover();
    assert.equal(recovered.length, 1);
    assert.equal(await readFile(path.join(root, "a.txt"), "utf8"), "from journal\n");
    assert.equal((await lstat(path.join(stateDir, "journal.key"))).mode & 0o777, 0o600);
  });
});
