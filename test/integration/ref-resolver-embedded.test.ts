/**
 * The same ref-resolver contract on the embedded Postgres (PGlite) that `webcodex dev` uses:
 * the migrations (plpgsql functions, triggers, array parameters) and the main flows run there.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RefResolverService } from "@webcodex/proto";
import { createInProcessClient, createPgliteDatabase, principalHeaders } from "@webcodex/platform";
import type { Principal } from "@webcodex/platform";
import { createRefResolver, migrateRefResolver } from "@webcodex/ref-resolver";

const as = (p: Principal) => ({ headers: principalHeaders(p) });
const local: Principal = { clientId: "local", subject: "dev" };

describe("ref-resolver on embedded PGlite", () => {
  it("migrates, issues, resolves, records and guards exactly as on Postgres", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wcx-refs-pglite-"));
    try {
      let db = await createPgliteDatabase(dir);
      assert.deepEqual(await migrateRefResolver(db), ["0001_baseline"]);
      let client = createInProcessClient(RefResolverService, createRefResolver({ db, liveCacheTtlMs: Number.POSITIVE_INFINITY }));
      await client.registerProject({ clientId: "local", projectId: "alpha", rootIdentity: "/a", name: "alpha" }, as(local));
      await client.registerProject({ clientId: "local", projectId: "beta", rootIdentity: "/b", name: "beta" }, as(local));
      const listed = await client.listProjects({}, as(local));
      assert.deepEqual(
        listed.projects.map((e) => e.projectRef),
        ["~p1", "~p2"],
      );
      const session = await client.createSession({ projectSelector: "~p1", title: "t" }, as(local));
      assert.equal(session.sessionRef, "~s1");
      const recorded = await client.recordSessionCall(
        {
          sessionSelector: "~s1",
          projectCanonicalId: "agent:local:alpha",
          call: { callId: "c1", tool: "read_files", effect: "read_only", outcome: "success", pathsCount: 1, parentCallId: "cell-1" },
        },
        as(local),
      );
      assert.equal(recorded.seq, 1n);
      const handoff = (await client.readSessionHandoff({ selector: "~s1" }, as(local))).handoff;
      assert.deepEqual(
        handoff?.recentCalls.map((c) => [c.tool, c.parentCallId]),
        [["read_files", "cell-1"]],
      );
      const rotated = await client.rotateAgentEndpoint({ agentId: "a", endpointId: "e", expectedControllerGeneration: 0n }, as(local));
      assert.equal(rotated.agentContinuationRef, "~a1");
      const call = async (tool: string, args: Record<string, unknown>) => {
        const res = await client.callAgentTool({ tool, argumentsJson: JSON.stringify(args) }, as(local));
        assert.equal(res.failure, undefined, tool);
        return JSON.parse(res.resultJson) as Record<string, unknown>;
      };
      const agent = await call("create_agent", { name: "w" });
      const task = await call("create_agent_task", {
        project: "~p1",
        title: "t",
        instructions: "",
        assignee_agent_id: agent["agent_id"],
        idempotency_key: "k",
      });
      const attempt = await call("start_agent_task_attempt", { task_id: task["task_id"], assignee_agent_id: agent["agent_id"], idempotency_key: "k" });
      assert.equal(attempt["attempt_ref"], "~t1");
      const events = await call("wait_for_agent_events", { agent_id: agent["agent_id"], wait_ms: 0 });
      assert.deepEqual(
        (events["events"] as Array<{ kind: string }>).map((e) => e.kind),
        ["task_assigned", "attempt_started"],
      );
      await assert.rejects(db.query("DELETE FROM refs.project_refs"));
      await db.close();

      // Reopen the data dir: same refs, nothing re-migrated, stale after a new root.
      db = await createPgliteDatabase(dir);
      assert.deepEqual(await migrateRefResolver(db), []);
      client = createInProcessClient(RefResolverService, createRefResolver({ db, liveCacheTtlMs: Number.POSITIVE_INFINITY }));
      assert.equal((await client.resolveProject({ selector: "~p1" }, as(local))).project?.canonicalId, "agent:local:alpha");
      assert.equal((await client.readSessionHandoff({ selector: "~s1" }, as(local))).handoff?.callsTotal, 1n);
      await client.registerProject({ clientId: "local", projectId: "alpha", rootIdentity: "/elsewhere", name: "alpha" }, as(local));
      assert.equal((await client.resolveProject({ selector: "~p1" }, as(local))).failure?.reasonCode, "stale_ref");
      assert.equal((await client.listProjects({}, as(local))).projects.find((e) => e.project?.projectId === "alpha")?.projectRef, "~p3");
      await db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
