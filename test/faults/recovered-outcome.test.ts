/**
 * What a model learns about an edit whose Runner died mid-transaction, through a real MCP
 * client against the distributed stack (each service its own process): the edit fails with
 * `outcome_unknown: true`, naming its `call_id`, and a `read_workspace_changes` follow-up;
 * while the Runner is down that follow-up cannot say more; once the Runner has restarted (and
 * its start-up recovery has run) the same follow-up, executed exactly as returned, lists the
 * call under `recovered_writes` as `rolled_back` or `completed`, and the files on disk match.
 * The edit was made in a Workflow Session: its handoff shows the call's recovered outcome, and
 * get_runtime_status counts the Project's recovered writes with a follow-up that lists them.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { open, readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { DistributedStack } from "@webcodex/cli";
import {
  backingServices,
  callTool,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  executeFollowUp,
  firstProjectRef,
  startTestStack,
} from "../support/index.js";
import type { TestDatabase } from "../support/index.js";
import { until } from "../support/until.js";

const token = `t-${randomBytes(16).toString("hex")}`;
const FILES = 4;
const name = (i: number) => `data/f${i}.txt`;
const body = (marker: string) => `txn: ${marker}\n` + `${"y".repeat(99)}\n`.repeat(30_000);

async function markerOf(dir: string, i: number): Promise<string> {
  const handle = await open(join(dir, name(i)), "r");
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(64), 0, 64, 0);
    return /^txn: (\S+)\n/.exec(buffer.subarray(0, bytesRead).toString("utf8"))?.[1] ?? "?";
  } finally {
    await handle.close();
  }
}

describe("an edit cut off by a Runner crash: outcome_unknown, then its recovered outcome", () => {
  let db: TestDatabase;
  let stack: DistributedStack;
  let client: Client;
  let project: string;
  let projectDir: string;

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    const files: Record<string, string> = { "README.md": "# recovered\n" };
    for (let i = 0; i < FILES; i++) files[name(i)] = body("t0");
    projectDir = createProjectDir(files, { name: "recovered" });
    stack = await startTestStack({ postgresUrl: db.url, redisUrl: services.redisUrl, projectDir, gatewayEnv: { WEBCODEX_DEV_TOKEN: token } });
    client = await connectMcp(stack.mcpUrl, token);
    project = await firstProjectRef(client);
  });
  after(async () => {
    await client?.close();
    await stack?.stop();
    await db?.drop();
  });

  it(
    "the model is told outcome_unknown with the call id, and after the restart the follow-up reports rolled_back or completed",
    { timeout: 300_000 },
    async () => {
      const runtime = (tool: string, args: Record<string, unknown>) => callTool(client, "call_runtime_tool", { tool, arguments: args });
      const created = await runtime("create_session", { project, title: "recovered" });
      assert.equal(created.isError, false, JSON.stringify(created.result));
      const sessionRef = String(created.result["session_ref"]);
      // Before any crash, status reports no recovered writes.
      const quiet = await runtime("get_runtime_status", {});
      assert.equal(quiet.isError, false, JSON.stringify(quiet.result));
      assert.equal(quiet.result["recovered_writes"], undefined, JSON.stringify(quiet.result));
      let cut: { result: Record<string, unknown>; marker: string; previous: string } | undefined;
      for (let attempt = 1; attempt <= 10 && cut === undefined; attempt++) {
        const marker = `a${attempt}`;
        const previous = await markerOf(projectDir, 0);
        const read = await callTool(client, "read_files", { project, files: Array.from({ length: FILES }, (_, i) => ({ path: name(i), end_line: 1 })) });
        assert.equal(read.isError, false, JSON.stringify(read.result));
        const items = read.result["items"] as Array<Record<string, unknown>>;
        const changes = await Promise.all(
          Array.from({ length: FILES }, async (_, i) => ({
            kind: "edit",
            path: name(i),
            expected_read_revision: items[i]?.["read_revision"],
            edits: [{ replace_exact: { old_text: `txn: ${await markerOf(projectDir, i)}\n`, new_text: `txn: ${marker}\n` } }],
          })),
        );
        let answered = false;
        const call = callTool(client, "edit_project_files", { project, changes, session_id: sessionRef }).finally(() => {
          answered = true;
        });
        // Kill the Runner once the transaction's first change is on disk (its intent is durable by then).
        const runner = stack.processes.get("runner");
        while (!answered && (await markerOf(projectDir, 0)) !== marker) await new Promise((resolve) => setImmediate(resolve));
        const exited = new Promise((resolve) => runner?.once("exit", resolve));
        runner?.kill("SIGKILL");
        await exited;
        const outcome = await call;
        if (outcome.isError && outcome.result["outcome_unknown"] === true) cut = { result: outcome.result, marker, previous };
        else await stack.restart("runner"); // the edit answered before the kill: try again
      }
      assert.ok(cut !== undefined, "one of ten kills landed inside a transaction");
      const failure = cut.result;
      const callId = (failure["evidence"] as Record<string, unknown> | undefined)?.["call_id"];
      assert.equal(typeof callId, "string", `the failure names its call: ${JSON.stringify(failure)}`);
      assert.ok(failure["follow_up"] !== undefined, `the failure carries a follow-up: ${JSON.stringify(failure)}`);

      // Until the Runner is back (and recovery has run) the follow-up cannot report the outcome.
      const early = await executeFollowUp(client, failure["follow_up"]);
      assert.equal(early.isError, true, JSON.stringify(early.result));
      assert.equal(typeof early.result["reason_code"], "string");

      await stack.restart("runner");
      const later = await until(
        "read_workspace_changes answers after the restart",
        async () => {
          const res = await executeFollowUp(client, failure["follow_up"]);
          return res.isError ? undefined : res;
        },
        60_000,
        200,
      );
      const recovered = (later.result["recovered_writes"] as Array<Record<string, unknown>> | undefined) ?? [];
      const mine = recovered.find((w) => w["call_id"] === callId);
      assert.ok(mine !== undefined, `recovered_writes names the call: ${JSON.stringify(later.result)}`);
      assert.equal(mine["tool"], "edit_project_files");
      assert.deepEqual(
        [...(mine["paths"] as string[])].sort(),
        Array.from({ length: FILES }, (_, i) => name(i)),
      );
      const markers = await Promise.all(Array.from({ length: FILES }, (_, i) => markerOf(projectDir, i)));
      if (mine["outcome"] === "completed") assert.deepEqual(markers, Array(FILES).fill(cut.marker), "completed: every change is on disk");
      else {
        assert.equal(mine["outcome"], "rolled_back");
        assert.deepEqual(markers, Array(FILES).fill(cut.previous), "rolled back: no change is on disk");
      }
      // What the model reads now agrees with the recorded outcome.
      const reread = await callTool(client, "read_files", { project, files: [{ path: name(0), end_line: 1 }] });
      const content = String((reread.result["items"] as Array<Record<string, unknown>>)[0]?.["content"] ?? "");
      assert.ok(content.startsWith(`txn: ${mine["outcome"] === "completed" ? cut.marker : cut.previous}`), content.slice(0, 40));
      assert.equal(await readFile(join(projectDir, "README.md"), "utf8"), "# recovered\n");

      // The Session's handoff says how the cut-off edit ended: its last edit_project_files call
      // (the one cut off) carries the recovered outcome; the edits that answered carry none.
      const handoff = await runtime("read_session_handoff", { session_id: sessionRef });
      assert.equal(handoff.isError, false, JSON.stringify(handoff.result));
      const edits = ((handoff.result["recent_calls"] as Array<Record<string, unknown>> | undefined) ?? []).filter((c) => c["tool"] === "edit_project_files");
      assert.ok(edits.length > 0, JSON.stringify(handoff.result));
      const last = edits[edits.length - 1] as Record<string, unknown>;
      assert.equal(last["recovered"], mine["outcome"], `the handoff shows the recovered outcome: ${JSON.stringify(handoff.result)}`);
      assert.deepEqual(
        edits.slice(0, -1).filter((c) => c["recovered"] !== undefined),
        [],
        "only the cut-off call shows a recovered outcome",
      );
      assert.equal((handoff.result["calls"] as Record<string, unknown>)["outcome_unknown"], 1, JSON.stringify(handoff.result["calls"]));

      // get_runtime_status (compact, as a Host calls it) counts the Project's recovered writes,
      // and its follow-up, executed exactly as returned, lists this call.
      const status = await runtime("get_runtime_status", {});
      assert.equal(status.isError, false, JSON.stringify(status.result));
      const rows = (status.result["recovered_writes"] as Array<Record<string, unknown>> | undefined) ?? [];
      assert.equal(rows.length, 1, `status reports the recovered writes: ${JSON.stringify(status.result)}`);
      const row = rows[0] as Record<string, unknown>;
      assert.ok(typeof row["project"] === "string" && String(row["project"]).startsWith("agent:"), JSON.stringify(row));
      assert.equal(row["count"], 1, JSON.stringify(row));
      const listed = await executeFollowUp(client, row["follow_up"]);
      assert.equal(listed.isError, false, JSON.stringify(listed.result));
      const again = ((listed.result["recovered_writes"] as Array<Record<string, unknown>> | undefined) ?? []).find((w) => w["call_id"] === callId);
      assert.equal(again?.["outcome"], mine["outcome"], JSON.stringify(listed.result));
    },
  );
});
