/**
 * ref-resolver against real Postgres: Workflow Sessions (session_ref as session_id, the call
 * record, the handoff, authority / visibility / lifecycle), and agent continuation and
 * attempt refs going stale on rotation and takeover.
 *
 * One concept over 400 lines: Workflow Sessions and agent refs in the ref-resolver.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { RefResolverService, SessionValidationSchema } from "@webcodex/proto";
import type { SessionCall } from "@webcodex/proto";
import { createInProcessClient, createPostgresDatabase, principalHeaders } from "@webcodex/platform";
import type { Database, Principal } from "@webcodex/platform";
import { createRefResolver, migrateRefResolver } from "@webcodex/ref-resolver";
import { createTestDatabase } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

type RefClient = Client<typeof RefResolverService>;
type CallInit = Partial<Omit<SessionCall, "$typeName" | "paths">> & { paths?: Array<{ path: string; readRevision?: string; changed?: boolean }> };
const as = (p: Principal) => ({ headers: principalHeaders(p) });
const runner: Principal = { clientId: "acme", subject: "runner:r1" };
const alice: Principal = { clientId: "acme", subject: "alice" };
const bob: Principal = { clientId: "acme", subject: "bob" };
const mallory: Principal = { clientId: "evil", subject: "mallory" };

interface Env {
  database: TestDatabase;
  db: Database;
  client: RefClient;
  close(): Promise<void>;
}

async function setup(options: { maxCallsPerSession?: number } = {}): Promise<Env> {
  const database = await createTestDatabase();
  const db = createPostgresDatabase({ url: database.url, max: 10 });
  await migrateRefResolver(db);
  const client = createInProcessClient(RefResolverService, createRefResolver({ db, ...options }));
  return {
    database,
    db,
    client,
    close: async () => {
      await db.close();
      await database.drop();
    },
  };
}

const register = (client: RefClient, projectId: string, root: string) =>
  client.registerProject({ clientId: "acme", projectId, rootIdentity: root, name: projectId }, as(runner));

let callSeq = 0;
const call = (init: CallInit) => ({ callId: `call-${++callSeq}`, effect: "read_only", outcome: "success", ...init });

describe("ref-resolver: Workflow Sessions", () => {
  let env: Env;
  before(async () => {
    env = await setup();
    await register(env.client, "app", "/srv/app");
    await register(env.client, "lib", "/srv/lib");
  });
  after(async () => {
    await env.close();
  });

  it("a session_ref works as session_id, and the handoff lists the session's calls", async () => {
    const { client } = env;
    const refs = Object.fromEntries((await client.listProjects({}, as(alice))).projects.map((e) => [e.project?.canonicalId, e.projectRef]));
    const created = await client.createSession({ projectSelector: refs["agent:acme:app"] ?? "", title: "fix the parser" }, as(alice));
    assert.equal(created.failure, undefined);
    const sessionRef = created.sessionRef;
    const sessionId = created.session?.sessionId ?? "";
    assert.match(sessionRef, /^~s\d+$/);
    assert.match(sessionId, /^wc_sess_[0-9a-f]{32}$/);
    assert.equal(created.session?.projectCanonicalId, "agent:acme:app");
    assert.equal(created.session?.state, "open");

    // Either selector canonicalizes to the same Session.
    const byRef = await client.resolveSession({ selector: sessionRef, projectCanonicalId: "agent:acme:app", requireOpen: true }, as(alice));
    const byId = await client.resolveSession({ selector: sessionId, projectCanonicalId: "agent:acme:app", requireOpen: true }, as(alice));
    assert.equal(byRef.session?.sessionId, sessionId);
    assert.equal(byId.session?.sessionId, sessionId);
    assert.equal(byId.sessionRef, sessionRef);

    const record = (selector: string, init: CallInit) =>
      client.recordSessionCall({ sessionSelector: selector, projectCanonicalId: "agent:acme:app", call: init }, as(alice));
    const first = await record(sessionRef, call({ tool: "read_files", pathsCount: 3, durationMs: 4 }));
    assert.deepEqual([first.recorded, first.seq, first.failure], [true, 1n, undefined]);
    await record(sessionId, call({ tool: "search_project_texts", pathsCount: 12 }));
    await record(sessionRef, call({ tool: "edit_project_files", effect: "workspace_write", pathsCount: 2, changedPathsCount: 2 }));
    await record(
      sessionRef,
      call({ tool: "edit_project_files", effect: "workspace_write", outcome: "failure", reasonCode: "stale_read_revision", pathsCount: 1 }),
    );
    await record(sessionId, call({ tool: "run_shell", effect: "process_execution", outcome: "pending", jobId: "job-1", jobState: "pending" }));
    await record(sessionRef, call({ tool: "run_detached_process", effect: "process_execution", outcome: "pending", jobId: "job-2", jobState: "pending" }));
    await record(sessionRef, call({ tool: "wait_for_job_terminal", effect: "read_only", jobId: "job-1", jobState: "terminal" }));
    const retried = call({ tool: "read_files", pathsCount: 1 });
    const once = await record(sessionRef, retried);
    const twice = await record(sessionRef, retried);
    assert.equal(twice.duplicate, true);
    assert.equal(twice.seq, once.seq, "a repeated call_id is recorded once");

    const handoff = await client.readSessionHandoff({ selector: sessionRef }, as(alice));
    assert.equal(handoff.failure, undefined);
    const h = handoff.handoff;
    assert.ok(h);
    assert.equal(h.session?.sessionId, sessionId);
    assert.equal(h.sessionRef, sessionRef);
    assert.equal(h.session?.title, "fix the parser");
    assert.equal(h.callsTotal, 8n);
    assert.equal(h.callsFailed, 1n);
    assert.deepEqual(Object.fromEntries(h.callsByTool.map((t) => [t.tool, Number(t.calls)])), {
      read_files: 2,
      search_project_texts: 1,
      edit_project_files: 2,
      run_shell: 1,
      run_detached_process: 1,
      wait_for_job_terminal: 1,
    });
    assert.deepEqual([h.read?.calls, h.read?.paths], [4n, 16n], "what was read");
    assert.deepEqual([h.changed?.calls, h.changed?.paths, h.changed?.failed], [2n, 2n, 1n], "what was changed");
    assert.deepEqual([h.run?.calls], [2n], "what was run");
    assert.deepEqual(
      h.pendingJobs.map((j) => [j.jobId, j.tool]),
      [["job-2", "run_detached_process"]],
      "job-1 finished; job-2 is pending",
    );
    assert.equal(h.pendingJobsTotal, 1n);
    assert.deepEqual(h.recentCalls.map((c) => [Number(c.seq), c.tool]).slice(-3), [
      [6, "run_detached_process"],
      [7, "wait_for_job_terminal"],
      [8, "read_files"],
    ]);
    assert.equal(h.recentCalls.find((c) => c.outcome === "failure")?.reasonCode, "stale_read_revision");
    assert.ok(h.session && h.session.lastActivityUnixMs >= h.session.createdUnixMs);

    // The same handoff through the canonical id.
    const again = await client.readSessionHandoff({ selector: sessionId, maxRecentCalls: 2 }, as(alice));
    assert.equal(again.handoff?.callsTotal, 8n);
    assert.equal(again.handoff?.recentCalls.length, 2);
  });

  it("a call made in a run_code_cell keeps the cell's call id as its parent in the handoff; a direct call has none", async () => {
    const { client } = env;
    const created = await client.createSession({ projectSelector: "agent:acme:app" }, as(alice));
    const record = (init: CallInit) =>
      client.recordSessionCall({ sessionSelector: created.sessionRef, projectCanonicalId: "agent:acme:app", call: call(init) }, as(alice));
    await record({ tool: "read_files" });
    for (const tool of ["search_project_texts", "read_files", "search_project_texts"]) await record({ tool, parentCallId: "cell-call-1" });
    await assert.rejects(record({ tool: "read_files", parentCallId: "not an id" }), /parent_call_id/);
    const self = call({ tool: "read_files" });
    await assert.rejects(
      client.recordSessionCall(
        { sessionSelector: created.sessionRef, projectCanonicalId: "agent:acme:app", call: { ...self, parentCallId: self.callId } },
        as(alice),
      ),
      /own parent/,
    );
    const h = (await client.readSessionHandoff({ selector: created.sessionRef }, as(alice))).handoff;
    assert.deepEqual(
      h?.recentCalls.map((c) => [Number(c.seq), c.tool, c.parentCallId]),
      [
        [1, "read_files", ""],
        [2, "search_project_texts", "cell-call-1"],
        [3, "read_files", "cell-call-1"],
        [4, "search_project_texts", "cell-call-1"],
      ],
    );
  });

  it("the call record keeps facts only and rejects anything else", async () => {
    const { client, db } = env;
    const created = await client.createSession({ projectSelector: "agent:acme:app" }, as(alice));
    const sessionRef = created.sessionRef;
    await assert.rejects(
      client.recordSessionCall(
        { sessionSelector: sessionRef, projectCanonicalId: "agent:acme:app", call: call({ tool: "read_files", reasonCode: "cat /etc/passwd" }) },
        as(alice),
      ),
      /invalid session call record/,
    );
    await assert.rejects(
      client.recordSessionCall({ sessionSelector: sessionRef, projectCanonicalId: "agent:acme:app", call: call({ tool: "read files" }) }, as(alice)),
      /invalid session call record/,
    );
    const columns = await db.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_schema = 'refs' AND table_name = 'session_calls' ORDER BY ordinal_position`,
    );
    assert.deepEqual(
      columns.rows.map((r) => r.column_name),
      [
        "session_id",
        "seq",
        "call_id",
        "tool",
        "effect",
        "outcome",
        "reason_code",
        "detail_code",
        "paths_count",
        "changed_paths_count",
        "job_id",
        "job_state",
        "duration_ms",
        "recorded_at",
        "validation_status",
        "validation_tests_passed",
        "validation_tests_failed",
        "validation_tests_skipped",
        "validation_errors",
        "validation_warnings",
        "paths",
        "command_summary",
        "exit_code",
        "parent_call_id",
      ],
      "no column can hold arguments or content: paths carry revisions, commands a bounded summary",
    );
    // A validation verdict outside the four statuses (prose, output) is refused like any other malformed fact.
    await assert.rejects(
      client.recordSessionCall(
        {
          sessionSelector: sessionRef,
          projectCanonicalId: "agent:acme:app",
          call: call({ tool: "project_validate", validation: create(SessionValidationSchema, { status: "error: src/a.ts(1,1) TS2322", errors: 1 }) }),
        },
        as(alice),
      ),
      /invalid session call record/,
    );
    await assert.rejects(
      client.recordSessionCall(
        {
          sessionSelector: sessionRef,
          projectCanonicalId: "agent:acme:app",
          call: call({ tool: "read_files", paths: [{ path: "a\u0000b", readRevision: "r_1" }] }),
        },
        as(alice),
      ),
      /invalid session call record/,
    );
    await assert.rejects(
      client.recordSessionCall(
        { sessionSelector: sessionRef, projectCanonicalId: "agent:acme:app", call: call({ tool: "run_shell", commandSummary: "x".repeat(201) }) },
        as(alice),
      ),
      /invalid session call record/,
    );
  });

  it("the handoff lists each path once with its latest revision, and each command once in its latest state", async () => {
    const { client } = env;
    const { sessionRef } = await client.createSession({ projectSelector: "agent:acme:app" }, as(alice));
    const record = (init: CallInit) =>
      client.recordSessionCall({ sessionSelector: sessionRef, projectCanonicalId: "agent:acme:app", call: call(init) }, as(alice));
    await record({
      tool: "read_files",
      paths: [
        { path: "src/a.ts", readRevision: "r_1" },
        { path: "README.md", readRevision: "r_7" },
      ],
    });
    await record({ tool: "edit_project_files", effect: "workspace_write", paths: [{ path: "src/a.ts", readRevision: "r_2", changed: true }] });
    await record({ tool: "run_shell", effect: "process_execution", outcome: "pending", jobId: "job_1", jobState: "pending", commandSummary: "npm test" });
    await record({ tool: "run_shell", effect: "process_execution", commandSummary: "ls", exitCode: 0 });
    await record({ tool: "wait_for_job_terminal", effect: "read_only", jobId: "job_1", jobState: "terminal", commandSummary: "npm test", exitCode: 1 });
    const { handoff } = await client.readSessionHandoff({ selector: sessionRef }, as(alice));
    assert.deepEqual(
      handoff?.paths.map((p) => [p.path, p.readRevision, p.changed]),
      [
        ["src/a.ts", "r_2", true],
        ["README.md", "r_7", false],
      ],
    );
    assert.deepEqual(
      handoff?.commands.map((c) => [c.tool, c.commandSummary, c.outcome, c.exitCode]),
      [
        ["run_shell", "npm test", "success", 1],
        ["run_shell", "ls", "success", 0],
      ],
    );
    assert.deepEqual([handoff?.pathsTruncated, handoff?.commandsTruncated], [false, false]);
  });

  it("business targeting re-runs Session authority, Project match, lifecycle and Project visibility", async () => {
    const { client } = env;
    const created = await client.createSession({ projectSelector: "agent:acme:lib" }, as(alice));
    const sessionRef = created.sessionRef;
    const sessionId = created.session?.sessionId ?? "";

    const mismatch = await client.recordSessionCall(
      { sessionSelector: sessionRef, projectCanonicalId: "agent:acme:app", call: call({ tool: "read_files" }) },
      as(alice),
    );
    assert.deepEqual([mismatch.failure?.reasonCode, mismatch.failure?.detailCode, mismatch.recorded], ["invalid_value", "session_project_mismatch", false]);

    for (const selector of ["~p1", "s1", "wc_sess_123", ""]) {
      const r = await client.resolveSession({ selector }, as(alice));
      assert.deepEqual([r.failure?.reasonCode, r.failure?.detailCode], ["invalid_value", "invalid_session_selector"], selector);
    }

    const closed = await client.closeSession({ selector: sessionRef }, as(alice));
    assert.deepEqual([closed.closedNow, closed.session?.state], [true, "closed"]);
    assert.ok((closed.session?.closedUnixMs ?? 0n) > 0n);
    assert.equal((await client.closeSession({ selector: sessionId }, as(alice))).closedNow, false, "closing twice is a no-op");
    const afterClose = await client.recordSessionCall(
      { sessionSelector: sessionId, projectCanonicalId: "agent:acme:lib", call: call({ tool: "read_files" }) },
      as(alice),
    );
    assert.deepEqual([afterClose.failure?.reasonCode, afterClose.failure?.detailCode], ["invalid_value", "session_closed"]);
    assert.equal((await client.resolveSession({ selector: sessionRef, requireOpen: true }, as(alice))).failure?.detailCode, "session_closed");
    assert.equal(
      (await client.readSessionHandoff({ selector: sessionRef }, as(alice))).handoff?.session?.state,
      "closed",
      "a closed Session still has a handoff",
    );

    // A new root for the Project: the Session (pinned to the old incarnation) fails closed.
    const open = await client.createSession({ projectSelector: "agent:acme:lib" }, as(alice));
    await register(client, "lib", "/srv/lib-moved");
    const gone = await client.resolveSession({ selector: open.sessionRef }, as(alice));
    assert.deepEqual([gone.failure?.reasonCode, gone.failure?.detailCode], ["project_not_found", "session_project_unavailable"]);
    assert.equal((await client.readSessionHandoff({ selector: open.sessionRef }, as(alice))).failure?.detailCode, "session_project_unavailable");
    assert.equal(
      (
        await client.recordSessionCall(
          { sessionSelector: open.sessionRef, projectCanonicalId: "agent:acme:lib", call: call({ tool: "read_files" }) },
          as(alice),
        )
      ).recorded,
      false,
    );

    // Hidden from alice: same answer; shown again: the same Session works again.
    const appSession = await client.createSession({ projectSelector: "agent:acme:app" }, as(alice));
    await client.setProjectVisibility({ clientId: "acme", projectId: "app", subject: "alice", visible: false }, as(runner));
    assert.equal((await client.resolveSession({ selector: appSession.sessionRef }, as(alice))).failure?.detailCode, "session_project_unavailable");
    await client.setProjectVisibility({ clientId: "acme", projectId: "app", subject: "alice", visible: true }, as(runner));
    assert.equal((await client.resolveSession({ selector: appSession.sessionRef }, as(alice))).session?.sessionId, appSession.session?.sessionId);
  });

  it("another principal cannot use or even detect a Session: every answer equals a never-issued one", async () => {
    const { client } = env;
    const created = await client.createSession({ projectSelector: "agent:acme:app" }, as(alice));
    const sessionId = created.session?.sessionId ?? "";
    const neverId = "wc_sess_" + "0".repeat(32);
    for (const stranger of [bob, mallory]) {
      for (const [selector, baseline] of [
        [created.sessionRef, "~s999999"],
        [sessionId, neverId],
      ] as const) {
        const resolved = await client.resolveSession({ selector, requireOpen: true }, as(stranger));
        assert.deepEqual([resolved.failure?.reasonCode, resolved.failure?.detailCode], ["invalid_value", "session_not_found"]);
        assert.deepEqual(resolved, await client.resolveSession({ selector: baseline, requireOpen: true }, as(stranger)));
        assert.deepEqual(await client.readSessionHandoff({ selector }, as(stranger)), await client.readSessionHandoff({ selector: baseline }, as(stranger)));
        assert.deepEqual(await client.closeSession({ selector }, as(stranger)), await client.closeSession({ selector: baseline }, as(stranger)));
        const rec = await client.recordSessionCall(
          { sessionSelector: selector, projectCanonicalId: "agent:acme:app", call: call({ tool: "read_files" }) },
          as(stranger),
        );
        const recNever = await client.recordSessionCall(
          { sessionSelector: baseline, projectCanonicalId: "agent:acme:app", call: call({ tool: "read_files" }) },
          as(stranger),
        );
        assert.deepEqual(rec, recNever);
      }
    }
    assert.equal((await client.resolveSession({ selector: created.sessionRef }, as(alice))).session?.state, "open", "the stranger changed nothing");
  });

  it("a Session at its record cap counts further calls as dropped", async () => {
    const capped = await setup({ maxCallsPerSession: 2 });
    try {
      await register(capped.client, "app", "/srv/app");
      const s = await capped.client.createSession({ projectSelector: "agent:acme:app" }, as(alice));
      const rec = (tool: string) =>
        capped.client.recordSessionCall({ sessionSelector: s.sessionRef, projectCanonicalId: "agent:acme:app", call: call({ tool }) }, as(alice));
      assert.equal((await rec("read_files")).recorded, true);
      assert.equal((await rec("read_files")).recorded, true);
      const third = await rec("read_files");
      assert.deepEqual([third.recorded, third.dropped], [false, true]);
      const h = (await capped.client.readSessionHandoff({ selector: s.sessionRef }, as(alice))).handoff;
      assert.deepEqual([h?.callsTotal, h?.callsDropped], [2n, 1n]);
    } finally {
      await capped.close();
    }
  });
});

describe("ref-resolver: agent continuation and attempt refs", () => {
  let env: Env;
  before(async () => {
    env = await setup();
  });
  after(async () => {
    await env.close();
  });

  it("rotation leaves the old agent_continuation_ref stale and never rewrites it onto the successor", async () => {
    const { client, db } = env;
    const created = await client.rotateAgentEndpoint({ agentId: "agent-7", endpointId: "main", expectedControllerGeneration: 0n }, as(alice));
    assert.equal(created.failure, undefined);
    assert.equal(created.continuation?.controllerGeneration, 1n);
    const first = created.agentContinuationRef;
    assert.match(first, /^~a\d+$/);
    assert.equal((await client.resolveAgentContinuation({ agentContinuationRef: first }, as(alice))).continuation?.controllerGeneration, 1n);
    assert.equal(
      (await client.issueAgentContinuationRef({ agentId: "agent-7", endpointId: "main", expectedControllerGeneration: 1n }, as(alice))).agentContinuationRef,
      first,
      "same generation, same ref",
    );

    const rotated = await client.rotateAgentEndpoint({ agentId: "agent-7", endpointId: "main", expectedControllerGeneration: 1n }, as(alice));
    const second = rotated.agentContinuationRef;
    assert.equal(rotated.continuation?.controllerGeneration, 2n);
    assert.notEqual(second, first);

    const stale = await client.resolveAgentContinuation({ agentContinuationRef: first }, as(alice));
    assert.deepEqual([stale.failure?.reasonCode, stale.failure?.detailCode, stale.continuation], ["stale_ref", "endpoint_generation_changed", undefined]);
    assert.equal((await client.resolveAgentContinuation({ agentContinuationRef: second }, as(alice))).continuation?.controllerGeneration, 2n);
    // The explicit tuple of the old generation is a fence failure, not a silent upgrade.
    const oldTuple = await client.resolveAgentContinuation({ agentId: "agent-7", endpointId: "main", expectedControllerGeneration: 1n }, as(alice));
    assert.deepEqual([oldTuple.failure?.reasonCode, oldTuple.failure?.detailCode], ["fence_rejected", "controller_generation_mismatch"]);
    assert.equal(
      (await client.resolveAgentContinuation({ agentId: "agent-7", endpointId: "main", expectedControllerGeneration: 2n }, as(alice))).continuation
        ?.controllerGeneration,
      2n,
    );
    // A rotation from a stale view fails; a ref and a tuple together are refused.
    assert.equal(
      (await client.rotateAgentEndpoint({ agentId: "agent-7", endpointId: "main", expectedControllerGeneration: 1n }, as(alice))).failure?.reasonCode,
      "fence_rejected",
    );
    assert.equal(
      (await client.resolveAgentContinuation({ agentContinuationRef: second, agentId: "agent-7" }, as(alice))).failure?.detailCode,
      "ref_with_explicit_tuple",
    );
    const pins = await db.query<{ code: string; controller_generation: string }>(
      `SELECT code, controller_generation FROM refs.agent_continuation_refs WHERE client_id='acme' AND subject='alice' ORDER BY code`,
    );
    assert.deepEqual(
      pins.rows.map((r) => [`~a${r.code}`, Number(r.controller_generation)]),
      [
        [first, 1],
        [second, 2],
      ],
      "the old ref still names generation 1",
    );

    // Another principal: the refs and the tuple look exactly like nothing.
    for (const stranger of [bob, mallory]) {
      assert.deepEqual(
        await client.resolveAgentContinuation({ agentContinuationRef: second }, as(stranger)),
        await client.resolveAgentContinuation({ agentContinuationRef: "~a999999" }, as(stranger)),
      );
      assert.deepEqual(
        await client.resolveAgentContinuation({ agentId: "agent-7", endpointId: "main", expectedControllerGeneration: 2n }, as(stranger)),
        await client.resolveAgentContinuation({ agentId: "agent-x", endpointId: "main", expectedControllerGeneration: 2n }, as(stranger)),
      );
      assert.deepEqual(
        await client.rotateAgentEndpoint({ agentId: "agent-7", endpointId: "main", expectedControllerGeneration: 2n }, as(stranger)),
        await client.rotateAgentEndpoint({ agentId: "agent-x", endpointId: "main", expectedControllerGeneration: 2n }, as(stranger)),
      );
    }
  });

  it("concurrent rotations from one generation: exactly one wins", async () => {
    const { client } = env;
    await client.rotateAgentEndpoint({ agentId: "agent-8", endpointId: "main", expectedControllerGeneration: 0n }, as(alice));
    const results = await Promise.all(
      Array.from({ length: 20 }, () => client.rotateAgentEndpoint({ agentId: "agent-8", endpointId: "main", expectedControllerGeneration: 1n }, as(alice))),
    );
    assert.equal(results.filter((r) => r.failure === undefined).length, 1);
    assert.ok(results.filter((r) => r.failure).every((r) => r.failure?.reasonCode === "fence_rejected"));
  });
});
