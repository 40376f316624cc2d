/**
 * The pipeline's Workflow Session path, in process: the ref-resolver and broker are
 * Connect router transports whose handlers the tests script.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import type { RecordSessionCallRequest } from "@webcodex/proto";
import { toolFailure, failureToWire } from "@webcodex/contracts";
import { createLogger } from "@webcodex/platform";
import type { ActionRecordInit } from "./audit-recorder.js";
import { testPipeline } from "./pipeline.test-support.js";

const SESSION = "wc_sess_0123456789abcdef0123456789abcdef";
const PROJECT = "agent:acme:app";

interface Script {
  resolveSession?: () => Promise<Record<string, unknown>>;
  /** Without it the resolver implements no AdmitAttemptRef: the call fails as an unreachable dependency would. */
  admitAttemptRef?: () => Promise<Record<string, unknown>>;
  recordSessionCall?: (req: RecordSessionCallRequest) => Promise<Record<string, unknown>>;
}

function harness(script: Script) {
  const seen = {
    resolveSession: 0,
    admitAttemptRef: 0,
    dispatch: 0,
    records: [] as RecordSessionCallRequest[],
    audit: [] as ActionRecordInit[],
    warnings: [] as string[],
  };
  const refResolver = createClient(
    RefResolverService,
    createRouterTransport(({ service }) => {
      service(RefResolverService, {
        resolveProject: () => ({
          project: { canonicalId: PROJECT, rootIdentity: "/srv/app", incarnation: 1n, clientId: "acme", projectId: "app", name: "app" },
        }),
        resolveSession: async () => {
          seen.resolveSession++;
          return script.resolveSession
            ? await script.resolveSession()
            : { session: { sessionId: SESSION, projectCanonicalId: PROJECT, state: "open" }, sessionRef: "~s1" };
        },
        recordSessionCall: async (req) => {
          seen.records.push(req);
          return script.recordSessionCall ? await script.recordSessionCall(req) : { recorded: true, seq: 1n };
        },
        ...(script.admitAttemptRef
          ? {
              admitAttemptRef: async () => {
                seen.admitAttemptRef++;
                return await (script.admitAttemptRef as () => Promise<Record<string, unknown>>)();
              },
            }
          : {}),
      });
    }),
  );
  const broker = createClient(
    RunnerBrokerService,
    createRouterTransport(({ service }) => {
      service(RunnerBrokerService, {
        dispatch: () => {
          seen.dispatch++;
          return {
            resultJson: JSON.stringify({
              items: [
                { path: "a.ts", content: "x", success: true },
                { path: "b.ts", content: "y", success: true },
              ],
            }),
          };
        },
      });
    }),
  );
  const logger = createLogger({
    service: "test",
    level: "warn",
    write: (line) => {
      seen.warnings.push(line);
    },
  });
  const pipeline = testPipeline({ refResolver, broker, logger, sessionRecordBudgetMs: 200 }, seen.audit);
  const caller = { principal: { clientId: "acme", subject: "alice" }, admissionProfile: "full" as const, scopes: ["webcodex:read", "webcodex:write"] };
  const read = (extra: Record<string, unknown>) =>
    pipeline.call(caller, "read_files", { project: "~p1", files: [{ path: "a.ts" }, { path: "b.ts" }], ...extra }, new AbortController().signal);
  const call = (tool: string, args: Record<string, unknown>) => pipeline.call(caller, tool, args, new AbortController().signal);
  return { seen, read, call };
}

test("a call with session_id is recorded into the canonical Session with counts and the paths read with their revisions (never content), and audited with it", async () => {
  const { seen, read } = harness({});
  const result = await read({ session_id: "~s1" });
  assert.equal(result.isError, false);
  assert.equal(seen.dispatch, 1);
  assert.equal(seen.records.length, 1);
  const record = seen.records[0] as RecordSessionCallRequest;
  assert.deepEqual(
    [record.sessionSelector, record.projectCanonicalId, record.call?.tool, record.call?.effect, record.call?.outcome, record.call?.pathsCount],
    [SESSION, PROJECT, "read_files", "read_only", "success", 2],
  );
  assert.ok((record.call?.paths ?? []).length > 0 && (record.call?.paths ?? []).every((p) => p.path !== "" && !p.changed), "the paths read");
  assert.ok(!JSON.stringify(record.call, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)).includes("content"), "never content");
  assert.equal(seen.audit[0]?.sessionId, SESSION);
  // Resolving and recording the Session are timed apart, named under their stages.
  assert.deepEqual(Object.keys(seen.audit[0]?.stageDurationsUs ?? {}).sort(), [
    "dispatch",
    "normalization",
    "projection",
    "record.session",
    "resolution",
    "resolution.session",
  ]);
});

test("an attempt_ref the resolver cannot be reached to admit fails at authorization as dependency_unavailable, nothing is dispatched, and the admission is timed as authorization.attempt", async () => {
  const { seen, call } = harness({});
  const result = await call("run_shell", { project: "~p1", command: "make", attempt_ref: "~t1" });
  assert.equal(result.isError, true);
  assert.deepEqual([result.structuredContent["reason_code"], result.structuredContent["failure_stage"]], ["dependency_unavailable", "authorization"]);
  assert.equal(seen.dispatch, 0);
  assert.deepEqual(Object.keys(seen.audit[0]?.stageDurationsUs ?? {}).sort(), ["authorization.attempt", "normalization", "projection", "resolution"]);
});

test("an attempt_ref the resolver refuses fails at authorization with the resolver's refusal and nothing is dispatched", async () => {
  const refused = toolFailure("fence_stale", "authorization", { detail_code: "attempt_superseded", evidence: { task_id: "task-1" } });
  const { seen, call } = harness({ admitAttemptRef: () => Promise.resolve({ failure: failureToWire(refused) }) });
  const result = await call("run_shell", { project: "~p1", command: "make", attempt_ref: "~t1" });
  assert.equal(result.isError, true);
  assert.deepEqual(
    [result.structuredContent["reason_code"], result.structuredContent["failure_stage"], result.structuredContent["detail_code"]],
    ["fence_stale", "authorization", "attempt_superseded"],
  );
  assert.deepEqual([seen.admitAttemptRef, seen.dispatch], [1, 0]);
  assert.deepEqual(Object.keys(seen.audit[0]?.stageDurationsUs ?? {}).sort(), ["authorization.attempt", "normalization", "projection", "resolution"]);
});

test("a Session the resolver refuses fails closed with its reason and nothing is dispatched or recorded", async () => {
  const refused = toolFailure("invalid_value", "authorization", { detail_code: "session_closed" });
  const { seen, read } = harness({ resolveSession: () => Promise.resolve({ failure: failureToWire(refused) }) });
  const result = await read({ session_id: "~s1" });
  assert.equal(result.isError, true);
  assert.deepEqual([result.structuredContent["reason_code"], result.structuredContent["detail_code"]], ["invalid_value", "session_closed"]);
  assert.deepEqual([seen.dispatch, seen.records.length, seen.audit[0]?.sessionId], [0, 0, ""]);
});

test("without session_id no Session is resolved or recorded", async () => {
  const { seen, read } = harness({});
  assert.equal((await read({})).isError, false);
  assert.deepEqual([seen.resolveSession, seen.records.length, seen.audit[0]?.sessionId], [0, 0, ""]);
});

test("a hung or failing session record neither fails nor holds the business result beyond the budget", async () => {
  const hung = harness({ recordSessionCall: () => new Promise(() => undefined) });
  const started = performance.now();
  const result = await hung.read({ session_id: "~s1" });
  const elapsed = performance.now() - started;
  assert.equal(result.isError, false);
  assert.equal((result.structuredContent["items"] as unknown[]).length, 2);
  assert.ok(elapsed < 1_500, `answered after ${Math.round(elapsed)} ms with a 200 ms budget`);
  assert.ok(hung.seen.warnings.some((l) => l.includes("session call not recorded")));

  const failing = harness({ recordSessionCall: () => Promise.reject(new Error("boom")) });
  assert.equal((await failing.read({ session_id: "~s1" })).isError, false);
  assert.ok(failing.seen.warnings.some((l) => l.includes("session call not recorded")));
});
