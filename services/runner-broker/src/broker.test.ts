/** The runner-broker service against in-memory Runners. One concept over 400 lines: the broker's RPC contract, one fake fleet. */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client, ServiceImpl } from "@connectrpc/connect";
import { RunnerBrokerService, RunnerService } from "@webcodex/proto";
import type { RefResolverService } from "@webcodex/proto";
import {
  followUpTarget,
  parseCanonicalProjectId,
  PipelineStage,
  ReasonCode,
  RUNNER_PROTOCOL_GENERATION,
  RunnerCapabilities,
  failureFromWire,
  toolFailure,
  waitForProjectFollowUp,
} from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import { createInProcessClient, createLogger, principalHeaders } from "@webcodex/platform";
import { createRunnerBroker } from "./broker.js";
import type { RunnerBrokerDeps } from "./broker.js";
import { createMemoryRunnerRegistry } from "./runner-registry.js";
import { createLeaseStore, createMemoryLeaseBackend } from "./leases/lease-store.js";
import { createMemoryFenceHighWaterMark } from "./leases/fence-hwm.js";
import { createMemoryConcurrencyLimiter } from "./admission/concurrency.js";
import { RUNNER_TOKEN_HEADER, runnerCredential } from "./runner-auth.js";
import type { Provisioner, ProvisioningState } from "./provisioning/provisioner.js";
import { noSuchProjectAnswer } from "./caller-policy.js";

const logger = createLogger({ service: "test", level: "silent" });
const ALL: RunnerCapabilityId[] = [
  "readFiles",
  "searchTexts",
  "applyTextEdit",
  "applyTextEditExpectedMatchCount",
  "gitReview",
  "processExecution",
  "shellExecution",
  "attemptFencing",
];

const refResolver = {
  registerProject: async (req: { clientId: string; projectId: string; rootIdentity: string }) => ({
    project: { canonicalId: `agent:${req.clientId}:${req.projectId}`, rootIdentity: req.rootIdentity },
    newIncarnation: false,
  }),
} as unknown as Client<typeof RefResolverService>;

interface FakeRunner {
  calls: Array<{ tool: string; fence: number }>;
  raised: Array<{ taskId: string; fence: number }>;
  impl: ServiceImpl<typeof RunnerService>;
  gate?: Promise<void>;
}

function fakeRunner(runnerId = ""): FakeRunner {
  const r: FakeRunner = {
    calls: [],
    raised: [],
    impl: {
      async execute(req) {
        r.calls.push({ tool: req.tool, fence: Number(req.fence) });
        if (r.gate) await r.gate;
        return { resultJson: JSON.stringify({ ok: true }) };
      },
      async describe() {
        return { runnerId };
      },
      async raiseAttemptFence(req) {
        r.raised.push({ taskId: req.attempt?.taskId ?? "", fence: Number(req.attempt?.fence ?? 0n) });
        return { highest: req.attempt?.fence ?? 0n };
      },
    },
  };
  return r;
}

function setup(over: Partial<RunnerBrokerDeps> = {}) {
  let t = 10_000;
  const clock = { now: () => t, advance: (ms: number) => (t += ms) };
  const runners = new Map<string, FakeRunner>();
  const deps: RunnerBrokerDeps = {
    registry: createMemoryRunnerRegistry({ lostAfterMs: 200, now: clock.now }),
    leases: createLeaseStore(createMemoryLeaseBackend({ now: clock.now }), createMemoryFenceHighWaterMark()),
    refResolver,
    // Whichever fake answers at the address now (the broker keeps one client per address).
    runnerClient: (url) =>
      createInProcessClient(RunnerService, {
        execute: (req, ctx) => runners.get(url)!.impl.execute(req, ctx),
        describe: (req, ctx) => runners.get(url)!.impl.describe(req, ctx),
        raiseAttemptFence: (req, ctx) => runners.get(url)!.impl.raiseAttemptFence(req, ctx),
      }),
    heartbeatIntervalMs: 100,
    transparentStartWaitMs: 200,
    logger,
    now: clock.now,
    ...over,
  };
  const broker = createInProcessClient(RunnerBrokerService, createRunnerBroker(deps));
  /**
   * Registers `runnerId` at `at.url` (default: its own id). Its fake answers there unless the
   * address already answers for another Runner and `at.replaces` is false.
   */
  const register = async (
    runnerId: string,
    caps: RunnerCapabilityId[] = ALL,
    headers: Record<string, string> = {},
    at: { url?: string; replaces?: boolean } = {},
  ) => {
    const endpointUrl = at.url ?? runnerId;
    const existing = runners.get(endpointUrl);
    const fake = existing && (endpointUrl === runnerId || at.replaces === false) ? existing : fakeRunner(runnerId);
    runners.set(endpointUrl, fake);
    const res = await broker.registerRunner(
      {
        runnerId,
        clientId: "c1",
        projectId: "p1",
        rootIdentity: "root-1",
        protocolGeneration: RUNNER_PROTOCOL_GENERATION,
        build: "b1",
        capabilities: new RunnerCapabilities(caps).toWire(),
        endpointUrl,
      },
      { headers },
    );
    return { res, fake };
  };
  const dispatch = (tool: string, args: Record<string, unknown>, callId = `call-${Math.random()}`) =>
    broker.dispatch({ callId, projectCanonicalId: "agent:c1:p1", rootIdentity: "root-1", tool, argumentsJson: JSON.stringify(args) });
  return { broker, clock, register, dispatch, runners, deps };
}

const plainEdit = { changes: [{ kind: "edit", path: "a.txt", expected_read_revision: "r1", edits: [{ replace_exact: { old_text: "a", new_text: "b" } }] }] };
const bulkEdit = {
  changes: [
    { kind: "edit", path: "a.txt", expected_read_revision: "r1", edits: [{ replace_exact: { old_text: "a", new_text: "b" }, expected_match_count: 3 }] },
  ],
};

describe("runner-broker", () => {
  it("grants the project lease to the first Runner and keeps the second as a standby", async () => {
    const s = setup();
    const a = await s.register("ra");
    const b = await s.register("rb");
    assert.equal(a.res.leaseHeld, true);
    assert.ok(a.res.fence > 0n);
    assert.equal(b.res.leaseHeld, false);
    assert.equal(b.res.projectFence, a.res.fence, "the standby learns the project's fence");
    const res = await s.dispatch("edit_project_files", plainEdit);
    assert.equal(res.failure, undefined);
    assert.deepEqual(a.fake.calls, [{ tool: "edit_project_files", fence: Number(a.res.fence) }], "routed to the holder with its fence");
    assert.equal(b.fake.calls.length, 0);
  });

  it("hands the lease to the standby with a higher fence once the holder stops heartbeating", async () => {
    const s = setup();
    const a = await s.register("ra");
    const b = await s.register("rb");
    s.clock.advance(150);
    await s.broker.heartbeat({ runnerId: "rb", fence: 0n });
    s.clock.advance(60); // ra's lease (TTL 200) lapsed; rb heartbeated 60 ms ago
    const hb = await s.broker.heartbeat({ runnerId: "rb", fence: 0n });
    assert.equal(hb.leaseHeld, true);
    assert.ok(hb.fence > a.res.fence);
    const stale = await s.broker.heartbeat({ runnerId: "ra", fence: a.res.fence });
    assert.equal(stale.leaseHeld, false, "the old holder cannot renew");
    assert.equal(stale.projectFence, hb.fence, "and learns the newer fence");
    await s.dispatch("read_files", { files: [{ path: "a" }] });
    assert.deepEqual(
      b.fake.calls.map((c) => c.fence),
      [Number(hb.fence)],
    );
  });

  it("rejects a bulk edit before dispatch when the Runner lacks apply_text_edit_expected_match_count, while a plain edit runs", async () => {
    const s = setup();
    const { fake } = await s.register("ra", ["readFiles", "searchTexts", "applyTextEdit"]);
    const bulk = await s.dispatch("edit_project_files", bulkEdit);
    assert.equal(bulk.failure?.reasonCode, "capability_missing");
    assert.equal(bulk.failure?.detailCode, "apply_text_edit_expected_match_count");
    assert.equal(bulk.failure?.stateChanged, false);
    assert.equal(fake.calls.length, 0, "nothing reached the Runner");
    const plain = await s.dispatch("edit_project_files", plainEdit);
    assert.equal(plain.failure, undefined);
    assert.equal(fake.calls.length, 1);
  });

  it("runs the literal run_process when the Runner lacks bash_login_v1 for the run_shell rewrite, and the rewrite when it has it", async () => {
    const login = { command: "make", shell: "bash", login: true };
    const literal = { tool: "run_process", argumentsJson: JSON.stringify({ args: ["bash", "-lc", "make"] }) };
    const dispatchRewrite = (s: ReturnType<typeof setup>, fallback = literal) =>
      s.broker.dispatch({
        callId: `call-${Math.random()}`,
        projectCanonicalId: "agent:c1:p1",
        rootIdentity: "root-1",
        tool: "run_shell",
        argumentsJson: JSON.stringify(login),
        fallback,
      });

    const older = setup();
    const { fake: old } = await older.register("ra", ["readFiles", "searchTexts", "applyTextEdit", "processExecution", "shellExecution"]);
    const ran = await dispatchRewrite(older);
    assert.equal(ran.failure, undefined, "a working run_process is not turned into capability_missing");
    assert.equal(ran.answeredFallback, true);
    assert.deepEqual(
      old.calls.map((c) => c.tool),
      ["run_process"],
    );

    const newer = setup();
    const { fake: current } = await newer.register("ra", [...ALL, "bashLogin"]);
    const rewritten = await dispatchRewrite(newer);
    assert.equal(rewritten.answeredFallback, false);
    assert.deepEqual(
      current.calls.map((c) => c.tool),
      ["run_shell"],
    );

    // Neither form can run: the refusal is about the call as the caller spelled it.
    const bare = setup();
    const { fake: none } = await bare.register("ra", ["readFiles", "searchTexts", "applyTextEdit"]);
    const refused = await dispatchRewrite(bare);
    assert.deepEqual(
      [refused.failure?.reasonCode, refused.failure?.detailCode, refused.answeredFallback],
      ["capability_missing", "process_execution_v1", true],
    );
    assert.equal(none.calls.length, 0);

    // A fallback of another effect class is never a substitute.
    const odd = await dispatchRewrite(older, { tool: "read_files", argumentsJson: JSON.stringify({ files: [{ path: "a" }] }) });
    assert.deepEqual([odd.failure?.reasonCode, odd.failure?.detailCode, odd.answeredFallback], ["capability_missing", "bash_login_v1", false]);
    assert.deepEqual(
      old.calls.map((c) => c.tool),
      ["run_process"],
      "nothing more ran",
    );
  });

  it("refuses calls still over the per-project concurrency limit after the admission wait, with a structured rate_limited failure", async () => {
    const s = setup({ concurrency: createMemoryConcurrencyLimiter({ limit: 1 }), admissionWaitMs: 50 });
    const { fake } = await s.register("ra");
    let open!: () => void;
    fake.gate = new Promise((r) => (open = r));
    const first = s.dispatch("read_files", { files: [{ path: "a" }] });
    while (fake.calls.length === 0) await new Promise((r) => setImmediate(r));
    const second = await s.dispatch("read_files", { files: [{ path: "b" }] });
    assert.equal(second.failure?.reasonCode, "rate_limited");
    assert.equal(second.failure?.detailCode, "project_concurrency_limit");
    assert.deepEqual((JSON.parse(second.failure?.evidenceJson ?? "{}") as { evidence: unknown }).evidence, { limit: 1, in_flight: 1 });
    open();
    assert.equal((await first).failure, undefined);
    delete fake.gate;
    assert.equal((await s.dispatch("read_files", { files: [{ path: "c" }] })).failure, undefined, "the slot is released");
  });

  it("a call over the limit queues for a slot and runs when one frees, within the admission wait", async () => {
    const s = setup({ concurrency: createMemoryConcurrencyLimiter({ limit: 1 }), admissionWaitMs: 5_000 });
    const { fake } = await s.register("ra");
    let open!: () => void;
    fake.gate = new Promise((r) => (open = r));
    const first = s.dispatch("read_files", { files: [{ path: "a" }] });
    while (fake.calls.length === 0) await new Promise((r) => setImmediate(r));
    const second = s.dispatch("read_files", { files: [{ path: "b" }] });
    // eslint-disable-next-line no-restricted-syntax -- not a synchronization: "nothing of the second call runs within 60 ms" is the assertion.
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(fake.calls.length, 1, "the second call waits: nothing of it has run");
    open();
    assert.equal((await first).failure, undefined);
    assert.equal((await second).failure, undefined, "admitted once the first released its slot");
    assert.equal(fake.calls.length, 2);
  });

  it("a Runner restarted at its holder's address takes the lease at once with a higher fence; a claim to an address answered by another Runner does not", async () => {
    const s = setup();
    const a = await s.register("ra", ALL, {}, { url: "http://runner:1" });
    assert.equal(a.res.leaseHeld, true);
    // A Runner that says it listens at ra's address while ra still answers there is a standby.
    const impostor = await s.register("rx", ALL, {}, { url: "http://runner:1", replaces: false });
    assert.equal(impostor.res.leaseHeld, false, "the address still answers as ra");
    // ra's process is replaced at its address by rb (ra has not missed a heartbeat yet).
    const b = await s.register("rb", ALL, {}, { url: "http://runner:1" });
    assert.equal(b.res.leaseHeld, true, "the address answers as rb: ra's lease is released");
    assert.ok(b.res.fence > a.res.fence, "a new fence, so anything still fenced by ra is refused");
    const stale = await s.broker.heartbeat({ runnerId: "ra", fence: a.res.fence });
    assert.equal(stale.leaseHeld, false, "ra cannot renew");
    const res = await s.dispatch("read_files", { files: [{ path: "a" }] });
    assert.equal(res.failure, undefined);
    assert.deepEqual(b.fake.calls, [{ tool: "read_files", fence: Number(b.res.fence) }], "routed to rb under its own fence");
    const status = await s.broker.getFleetStatus({});
    const holder = status.runners.find((r) => r.leaseHeld);
    assert.equal(holder?.runnerId, "rb");
  });

  it("requires each Runner's own workspace-bound credential on RegisterRunner and Heartbeat; the key itself is no credential", async () => {
    const s = setup({ runnerToken: "s3cret" });
    const own = runnerCredential("s3cret", { clientId: "c1", projectId: "p1" });
    await assert.rejects(s.register("ra"), (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated);
    await assert.rejects(
      s.register("ra", ALL, { [RUNNER_TOKEN_HEADER]: "wrong" }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated,
    );
    await assert.rejects(
      s.register("ra", ALL, { [RUNNER_TOKEN_HEADER]: "s3cret" }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated,
    );
    // A credential stolen from another workspace's Runner registers nothing here.
    const stolen = runnerCredential("s3cret", { clientId: "c1", projectId: "other" });
    await assert.rejects(
      s.register("ra", ALL, { [RUNNER_TOKEN_HEADER]: stolen }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated,
    );
    const ok = await s.register("ra", ALL, { [RUNNER_TOKEN_HEADER]: own });
    assert.equal(ok.res.leaseHeld, true);
    await assert.rejects(
      s.broker.heartbeat({ runnerId: "ra", fence: ok.res.fence }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated,
    );
    await assert.rejects(
      s.broker.heartbeat({ runnerId: "ra", fence: ok.res.fence }, { headers: { [RUNNER_TOKEN_HEADER]: stolen } }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated,
    );
    assert.equal((await s.broker.heartbeat({ runnerId: "ra", fence: ok.res.fence }, { headers: { [RUNNER_TOKEN_HEADER]: own } })).known, true);
  });

  it("reports a lost Runner with a structured reason and runs nothing", async () => {
    const s = setup();
    const { fake } = await s.register("ra");
    s.clock.advance(201);
    const res = await s.dispatch("edit_project_files", plainEdit);
    assert.equal(res.failure?.reasonCode, "runner_unavailable");
    assert.equal(res.failure?.detailCode, "runner_lost");
    assert.equal(res.failure?.outcomeUnknown, false);
    assert.equal(fake.calls.length, 0);
  });

  it("relays a raised Attempt fence to the Project's lease holder only, and says so when no Runner can be told", async () => {
    const s = setup();
    const a = await s.register("ra");
    const b = await s.register("rb");
    const raise = () =>
      s.broker.raiseProjectAttemptFence({ projectCanonicalId: "agent:c1:p1", rootIdentity: "root-1", attempt: { taskId: "wc_task_1", fence: 7n } });
    const told = await raise();
    assert.deepEqual([told.failure, told.highest], [undefined, 7n]);
    assert.deepEqual(a.fake.raised, [{ taskId: "wc_task_1", fence: 7 }], "the holder recorded it");
    assert.equal(b.fake.raised.length, 0, "not the standby");
    s.clock.advance(201);
    const lost = await raise();
    assert.deepEqual([lost.failure?.reasonCode, lost.failure?.detailCode], ["runner_unavailable", "runner_lost"]);
    assert.equal(a.fake.raised.length, 1, "nothing reached the lost Runner");
    await assert.rejects(
      s.broker.raiseProjectAttemptFence({ projectCanonicalId: "agent:c1:p1" }),
      (e: unknown) => ConnectError.from(e).code === Code.InvalidArgument,
    );
    await assert.rejects(
      s.broker.raiseProjectAttemptFence({ projectCanonicalId: "agent:c1:p1", attempt: { taskId: "wc_task_1", fence: 8n } }),
      (e: unknown) => ConnectError.from(e).code === Code.InvalidArgument,
      "the root identity is required",
    );
  });

  it("does not relay a raised Attempt fence to a Runner serving another incarnation of the Project", async () => {
    const s = setup();
    const a = await s.register("ra");
    const res = await s.broker.raiseProjectAttemptFence({
      projectCanonicalId: "agent:c1:p1",
      rootIdentity: "root-2",
      attempt: { taskId: "wc_task_1", fence: 3n },
    });
    assert.deepEqual([res.failure?.reasonCode, res.failure?.detailCode, res.highest], ["runner_unavailable", "runner_serves_other_incarnation", 0n]);
    assert.equal(a.fake.raised.length, 0, "the Runner of root-1 was not told");
  });

  it("does not relay a raised Attempt fence to a Runner without attempt fencing", async () => {
    const s = setup();
    const a = await s.register(
      "ra",
      ALL.filter((c) => c !== "attemptFencing"),
    );
    const res = await s.broker.raiseProjectAttemptFence({
      projectCanonicalId: "agent:c1:p1",
      rootIdentity: "root-1",
      attempt: { taskId: "wc_task_1", fence: 2n },
    });
    assert.equal(res.failure?.reasonCode, "capability_missing");
    assert.equal(a.fake.raised.length, 0);
  });

  it("reports each Project's runner state in one call: ready, registered (standby only, lost, other root) or none", async () => {
    const s = setup();
    const states = async (root = "root-1") =>
      (
        await s.broker.getProjectRunnerStates({
          projects: [
            { projectCanonicalId: "agent:c1:p1", rootIdentity: root },
            { projectCanonicalId: "agent:c1:other", rootIdentity: "root-9" },
          ],
        })
      ).states;
    assert.deepEqual(await states(), { "agent:c1:p1": "none", "agent:c1:other": "none" });
    await s.register("ra");
    assert.deepEqual(await states(), { "agent:c1:p1": "ready", "agent:c1:other": "none" });
    assert.equal((await states("root-2"))["agent:c1:p1"], "registered", "a Runner serving another incarnation is not ready for this one");
    s.clock.advance(201);
    assert.equal((await states())["agent:c1:p1"], "registered", "a lost Runner is known but takes no calls");
  });

  it("serves sparse status without rows and full status with rows from the same counts", async () => {
    const s = setup();
    await s.register("ra");
    await s.register("rb", ["readFiles"]);
    const sparse = await s.broker.getFleetStatus({ clientId: "c1", summaryOnly: true });
    assert.equal(sparse.runners.length, 0);
    assert.equal(sparse.summary?.runnersConnected, 2);
    assert.equal(sparse.summary?.runnersStandby, 1);
    assert.equal(sparse.summary?.projectsRoutable, 1);
    assert.equal(sparse.summary?.baselineFaults, 1);
    const full = await s.broker.getFleetStatus({ clientId: "c1" });
    assert.deepEqual(full.summary, sparse.summary);
    assert.deepEqual(
      full.runners.map((r) => [r.runnerId, r.leaseHeld]),
      [
        ["ra", true],
        ["rb", false],
      ],
    );
    assert.equal((await s.broker.getFleetStatus({ clientId: "other", summaryOnly: true })).summary?.runnersTotal, 0);
  });

  it("provisions a Runner where none runs, and only for the caller's own projects", async () => {
    const calls: string[] = [];
    const provisioner: Provisioner = {
      kind: "kubernetes",
      ensureRunner: async (w) => {
        calls.push(`ensure ${w.clientId}/${w.projectId}`);
        return { action: "created", name: "wcx-runner-x" };
      },
      removeRunner: async (w, o) => {
        calls.push(`remove ${w.clientId}/${w.projectId} keep=${o?.keepWorkspace === true}`);
        return true;
      },
      close: async () => undefined,
    };
    const s = setup({ provisioner });
    const res = await s.dispatch("read_files", { files: [{ path: "a" }] });
    assert.equal(res.failure?.detailCode, "runner_starting");
    const starting = failureFromWire(res.failure!);
    assert.equal(starting.evidence?.["retry_after_ms"], 2000, "runner_starting says when to retry");
    assert.deepEqual(starting.follow_up, {
      follow_up_kind: "mechanically_followable",
      tool: "call_runtime_tool",
      arguments: { tool: "wait_for_project_ready", arguments: { project: "agent:c1:p1" } },
    });
    const own = { headers: principalHeaders({ clientId: "c1", subject: "u" }) };
    assert.equal((await s.broker.ensureProjectRunner({ clientId: "c1", projectId: "p1" }, own)).action, "created");
    assert.equal((await s.broker.removeProjectRunner({ clientId: "c1", projectId: "p1", keepWorkspace: true }, own)).removed, true);
    await assert.rejects(
      s.broker.removeProjectRunner({ clientId: "c2", projectId: "p1" }, own),
      (e: unknown) => e instanceof ConnectError && e.code === Code.PermissionDenied,
    );
    // The call starts the Runner and waits for it (bounded); answering runner_starting, it asks
    // again (idempotent); then EnsureProjectRunner and the removal.
    assert.deepEqual(calls, ["ensure c1/p1", "ensure c1/p1", "ensure c1/p1", "remove c1/p1 keep=true"]);
    assert.ok(starting.evidence?.["waited_for_runner_ms"] !== undefined, "it waited for the Runner it started");
  });

  it("a Runner that cannot be scheduled is runner_unschedulable with the pod's condition, not an endless runner_starting", async () => {
    const condition = { type: "PodScheduled", reason: "Unschedulable", message: "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims." };
    const provisioner: Provisioner = {
      kind: "kubernetes",
      ensureRunner: async () => ({ action: "exists", name: "wcx-runner-x" }),
      provisioningState: async () => ({ state: "unschedulable", condition }),
      removeRunner: async () => true,
      close: async () => undefined,
    };
    const s = setup({ provisioner });
    const res = await s.dispatch("read_files", { files: [{ path: "a" }] });
    const f = failureFromWire(res.failure!);
    assert.deepEqual([f.reason_code, f.detail_code, f.state_changed, f.outcome_unknown], ["runner_unavailable", "runner_unschedulable", false, false]);
    // The broker just started, so the call first waited (bounded) for a Runner to register.
    const { waited_for_runner_ms: _waited, ...evidence } = f.evidence ?? {};
    assert.deepEqual(evidence, { condition });
    assert.equal(f.follow_up && followUpTarget(f.follow_up).tool, "wait_for_project_ready");
    const own = { headers: principalHeaders({ clientId: "c1", subject: "u" }) };
    const prov = await s.broker.getProjectProvisioning({ clientId: "c1", projectId: "p1" }, own);
    assert.equal(prov.state, "unschedulable");
    assert.equal(prov.failure?.detailCode, "runner_unschedulable");
  });

  it("the fleet's answers reach the caller: quota_exceeded with limit and use, a pod condition's own detail code, and each call noted for the idle clock", async () => {
    const quota = toolFailure(ReasonCode.quotaExceeded, PipelineStage.dispatch, {
      detail_code: "live_runners",
      evidence: { quota: "live_runners", limit: 2, use: 2 },
      message: "over quota",
      follow_up: waitForProjectFollowUp("agent:c1:p1"),
    });
    let state: ProvisioningState = { state: "failed", failure: quota };
    const noted: string[] = [];
    const provisioner: Provisioner = {
      kind: "kubernetes",
      ensureRunner: async () => ({ action: "exists", name: "wcx-runner-x" }),
      provisioningState: async () => state,
      noteCall: (w) => noted.push(`${w.clientId}/${w.projectId}`),
      removeRunner: async () => true,
      close: async () => undefined,
    };
    const s = setup({ provisioner });
    const refused = failureFromWire((await s.dispatch("read_files", { files: [{ path: "a" }] })).failure!);
    const { waited_for_runner_ms: _waited, ...evidence } = refused.evidence ?? {};
    assert.deepEqual([refused.reason_code, refused.detail_code, evidence], ["quota_exceeded", "live_runners", { quota: "live_runners", limit: 2, use: 2 }]);
    assert.equal(refused.follow_up && followUpTarget(refused.follow_up).tool, "wait_for_project_ready");
    assert.deepEqual(noted, ["c1/p1"]);
    state = {
      state: "unschedulable",
      condition: { type: "RunnerPod", reason: "runner_crash_loop", message: "back-off 5m0s", detailCode: "runner_crash_loop" },
    };
    const crash = failureFromWire((await s.dispatch("read_files", { files: [{ path: "a" }] })).failure!);
    assert.deepEqual([crash.reason_code, crash.detail_code], ["runner_unavailable", "runner_crash_loop"]);
    assert.deepEqual(noted, ["c1/p1", "c1/p1"]);
  });

  it("removing a Project's Runner forgets its registration: not listed, counted or routed to", async () => {
    const provisioner: Provisioner = {
      kind: "kubernetes",
      ensureRunner: async () => ({ action: "exists", name: "x" }),
      removeRunner: async () => true,
      close: async () => undefined,
    };
    const s = setup({ provisioner });
    await s.register("ra");
    assert.equal((await s.broker.getFleetStatus({ clientId: "c1", summaryOnly: true })).summary?.runnersTotal, 1);
    const own = { headers: principalHeaders({ clientId: "c1", subject: "u" }) };
    await s.broker.removeProjectRunner({ clientId: "c1", projectId: "p1" }, own);
    assert.equal((await s.broker.getFleetStatus({ clientId: "c1", summaryOnly: true })).summary?.runnersTotal, 0);
    const res = await s.dispatch("read_files", { files: [{ path: "a" }] });
    assert.equal(res.failure?.reasonCode, "runner_unavailable");
  });

  it("parses canonical project ids whose client id contains colons", () => {
    assert.deepEqual(parseCanonicalProjectId("agent:urn:x:c:proj-1"), { clientId: "urn:x:c", projectId: "proj-1" });
    assert.equal(parseCanonicalProjectId("project:x"), undefined);
  });
});

/** A lease store where agent:c1:p1 had a Runner before (one fence issued, its lease released): a broker restarted since. */
async function leasesServedBefore() {
  const leases = createLeaseStore(createMemoryLeaseBackend(), createMemoryFenceHighWaterMark());
  const granted = await leases.acquire("agent:c1:p1", "runner-before-restart", 60_000);
  assert.ok(granted.held);
  assert.equal(await leases.release("agent:c1:p1", "runner-before-restart", granted.lease.fence), true);
  return leases;
}

describe("runner-broker: a call for a Project whose Runner is starting", () => {
  it("waits for the Runner (bounded) instead of failing, then runs on it", async () => {
    const { register, dispatch } = setup({ runnerStartWaitMs: 5_000, leases: await leasesServedBefore() });
    const call = dispatch("read_files", { files: [{ path: "a.txt" }] });
    // eslint-disable-next-line no-restricted-syntax -- not a synchronization: the Runner appears 150 ms after the call, which must still be waiting.
    await new Promise((r) => setTimeout(r, 150));
    const { fake } = await register("r1");
    const res = await call;
    assert.equal(res.failure, undefined);
    assert.deepEqual(
      fake.calls.map((c) => c.tool),
      ["read_files"],
    );
  });

  it("an Attempt fence relay waits for the Runner the same way, then tells it", async () => {
    const { broker, register } = setup({ runnerStartWaitMs: 5_000, leases: await leasesServedBefore() });
    const relay = broker.raiseProjectAttemptFence({ projectCanonicalId: "agent:c1:p1", rootIdentity: "root-1", attempt: { taskId: "wc_task_1", fence: 4n } });
    // eslint-disable-next-line no-restricted-syntax -- not a synchronization: the Runner appears 150 ms after the relay, which must still be waiting.
    await new Promise((r) => setTimeout(r, 150));
    const { fake } = await register("r1");
    const res = await relay;
    assert.deepEqual([res.failure, res.highest], [undefined, 4n]);
    assert.deepEqual(fake.raised, [{ taskId: "wc_task_1", fence: 4 }]);
  });

  it("fails runner_unavailable after the bound, saying how long it waited", async () => {
    const { dispatch } = setup({ runnerStartWaitMs: 200, leases: await leasesServedBefore() });
    const started = Date.now();
    const res = await dispatch("read_files", { files: [{ path: "a.txt" }] });
    assert.equal(res.failure?.reasonCode, "runner_unavailable");
    assert.equal(res.failure?.detailCode, "no_live_runner");
    const waited = Number((JSON.parse(res.failure?.evidenceJson ?? "{}") as { evidence?: Record<string, unknown> }).evidence?.["waited_for_runner_ms"]);
    assert.ok(waited >= 190 && Date.now() - started < 2_000, `waited ${waited} ms`);
  });

  it("answers a project no Runner ever served at once, even in the start window, as a project of another tenant", async () => {
    const { dispatch } = setup({ runnerStartWaitMs: 5_000 });
    const started = Date.now();
    const res = await dispatch("read_files", { files: [{ path: "a.txt" }] });
    assert.ok(Date.now() - started < 2_500, "no start-window wait (5 s)");
    assert.deepEqual(res.failure, noSuchProjectAnswer().failure);
  });

  it("does not wait once the broker has run past the start window and no Runner was ever seen", async () => {
    const { dispatch } = setup({ runnerStartWaitMs: 50 });
    // eslint-disable-next-line no-restricted-syntax -- not a synchronization: the condition is the passing of time (the 50 ms start window).
    await new Promise((r) => setTimeout(r, 80));
    const started = Date.now();
    const res = await dispatch("read_files", { files: [{ path: "a.txt" }] });
    assert.equal(res.failure?.detailCode, "no_live_runner");
    assert.equal((JSON.parse(res.failure?.evidenceJson ?? "{}") as { evidence?: Record<string, unknown> }).evidence?.["waited_for_runner_ms"], undefined);
    assert.ok(Date.now() - started < 40);
  });
});

describe("runner-broker: after a restart of the broker or of its Runners", () => {
  it("a Runner known from before the broker started is neither ready nor routed until it heartbeats again", async () => {
    const first = setup();
    const { res } = await first.register("r1");
    assert.equal(res.leaseHeld, true);
    const project = [{ projectCanonicalId: "agent:c1:p1", rootIdentity: "root-1" }];
    assert.equal((await first.broker.getProjectRunnerStates({ projects: project })).states["agent:c1:p1"], "ready");
    // A new broker on the same stores, started later: r1's record and lease are still live there.
    first.clock.advance(50);
    const restarted = createInProcessClient(RunnerBrokerService, createRunnerBroker({ ...first.deps, runnerStartWaitMs: 100, now: first.clock.now }));
    assert.equal((await restarted.getProjectRunnerStates({ projects: project })).states["agent:c1:p1"], "registered", "not ready before it is seen alive");
    const before = await restarted.dispatch({
      callId: "c-1",
      projectCanonicalId: "agent:c1:p1",
      rootIdentity: "root-1",
      tool: "read_files",
      argumentsJson: "{}",
    });
    assert.equal(before.failure?.reasonCode, "runner_unavailable");
    assert.equal(first.runners.get("r1")?.calls.length, 0, "nothing was sent to a Runner not seen since the restart");
    await restarted.heartbeat({ runnerId: "r1", fence: res.fence });
    assert.equal((await restarted.getProjectRunnerStates({ projects: project })).states["agent:c1:p1"], "ready");
  });

  it("a Runner registering after a restart, while the old lease holder's address refuses connections, takes the Project at once, with the next fence", async () => {
    const before = setup();
    const old = await before.register("r-old");
    // The whole stack restarted: a new broker on the same stores, the old Runner's process gone.
    before.clock.advance(50);
    const broker = createInProcessClient(RunnerBrokerService, createRunnerBroker({ ...before.deps, now: before.clock.now }));
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED", syscall: "connect" });
    const gone = before.runners.get("r-old")!;
    gone.impl = {
      ...gone.impl,
      describe: () => {
        throw refused;
      },
    };
    const fake = fakeRunner("r-new");
    before.runners.set("r-new", fake);
    const fresh = await broker.registerRunner({
      runnerId: "r-new",
      clientId: "c1",
      projectId: "p1",
      rootIdentity: "root-1",
      protocolGeneration: RUNNER_PROTOCOL_GENERATION,
      build: "b1",
      capabilities: new RunnerCapabilities(ALL).toWire(),
      endpointUrl: "r-new",
    });
    assert.equal(fresh.leaseHeld, true, "not after the old lease lapses");
    assert.ok(fresh.fence > old.res.fence);
    const routed = await broker.dispatch({
      callId: "c-2",
      projectCanonicalId: "agent:c1:p1",
      rootIdentity: "root-1",
      tool: "read_files",
      argumentsJson: JSON.stringify({ files: [{ path: "a" }] }),
    });
    assert.equal(routed.failure, undefined);
    assert.equal(fake.calls.length, 1);
  });

  it("a live lease holder whose address refuses connections keeps its lease while this broker has seen it alive", async () => {
    const s = setup();
    await s.register("r-live");
    s.runners.get("r-live")!.impl.describe = () => {
      throw Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED", syscall: "connect" });
    };
    assert.equal((await s.register("r-other")).res.leaseHeld, false);
  });

  it("a lease holder that answers as itself keeps its lease when another Runner registers", async () => {
    const s = setup();
    await s.register("r-live");
    const standby = await s.register("r-standby");
    assert.equal(standby.res.leaseHeld, false);
  });
});
