/**
 * The ref-resolver service: durable identities and principal-scoped refs. The caller comes
 * from request headers (set by the gateway or a service), never from the request body.
 * Domain failures travel inside responses as DomainFailure; malformed service-to-service
 * requests are Connect errors.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { ServiceImpl } from "@connectrpc/connect";
import type { RefResolverService } from "@webcodex/proto";
import { principalFromHeaders, runMigrations } from "@webcodex/platform";
import type { Database, Logger } from "@webcodex/platform";
import { isCanonicalIdPart, failureToWire } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import { createAgentContinuations } from "./agents/agent-continuations.js";
import { createAgentStore } from "./agents/agent-store.js";
import type { AgentContinuation } from "./agents/agent-store.js";
import { createAgentTasks } from "./agents/agent-tasks.js";
import { createAgentEventBus } from "./agents/event-bus.js";
import type { AgentEventBus } from "./agents/event-bus.js";
import { createMemoryTaskFenceCounter } from "./agents/fence-counter.js";
import type { TaskFenceCounter } from "./agents/fence-counter.js";
import { refResolverMigrations } from "./migrations.js";
import { repairRefCounters } from "./refs/counter-invariants.js";
import type { CounterRepair } from "./refs/counter-invariants.js";
import { createGoalPlanStore } from "./plans/goal-plan-store.js";
import { createProjectStore, isProjectVisibility, ProjectOwnershipError } from "./projects/project-store.js";
import type { ProjectRecord } from "./projects/project-store.js";
import { createSessionStore, SessionCallRecordError } from "./sessions/session-store.js";
import type { SessionRecord } from "./sessions/session-store.js";
import type { HandoffRecap } from "./sessions/session-model.js";

export const REF_RESOLVER_SCHEMA = "refs";

export async function migrateRefResolver(db: Database): Promise<string[]> {
  return runMigrations(db, REF_RESOLVER_SCHEMA, refResolverMigrations);
}

/**
 * The start-up check of the ref stores (after migrations): every counter at least its highest
 * issued code. A counter found behind is advanced (always safe: codes are never reused) and
 * each repair is logged as a warning naming the principal, kind and both values.
 */
export async function checkRefStores(db: Database, logger: Logger): Promise<CounterRepair[]> {
  const repairs = await repairRefCounters(db, REF_RESOLVER_SCHEMA);
  for (const r of repairs) {
    logger.warn("ref counter was behind its issued refs: advanced to the highest issued code", {
      client_id: r.clientId,
      subject: r.subject,
      kind: r.kind,
      counter_was: r.was,
      counter_now: r.now,
    });
  }
  logger.info("ref store invariants checked", { repaired: repairs.length });
  return repairs;
}

export interface RefResolverDeps {
  db: Database;
  /** Live-Project / visibility cache TTL (see ProjectStoreOptions); Infinity in embedded mode. */
  liveCacheTtlMs?: number;
  /** Calls recorded per Workflow Session before further calls only count as dropped. */
  maxCallsPerSession?: number;
  /** Task fence counter (Redis in distributed mode); in-process when absent. */
  taskFences?: TaskFenceCounter;
  /** Wakes wait_for_agent_events (Postgres LISTEN in distributed mode); in-process when absent. */
  agentEvents?: AgentEventBus;
}

const toProto = (p: ProjectRecord) => ({
  canonicalId: p.canonicalId,
  clientId: p.clientId,
  projectId: p.projectId,
  rootIdentity: p.rootIdentity,
  incarnation: BigInt(p.incarnation),
  name: p.name,
  ownerSubject: p.ownerSubject,
  visibility: p.visibility,
});

const sessionToProto = (s: SessionRecord) => ({
  sessionId: s.sessionId,
  projectCanonicalId: s.projectCanonicalId,
  projectIncarnation: BigInt(s.projectIncarnation),
  title: s.title,
  state: s.state,
  createdUnixMs: BigInt(s.createdMs),
  lastActivityUnixMs: BigInt(s.lastActivityMs),
  closedUnixMs: BigInt(s.closedMs),
  callsRecorded: BigInt(s.callsRecorded),
});

const recapToProto = (r: HandoffRecap) => ({
  callsTotal: BigInt(r.callsTotal),
  callsFailed: BigInt(r.callsFailed),
  callsOutcomeUnknown: BigInt(r.callsOutcomeUnknown),
  callsByTool: r.callsByTool.map((t) => ({ tool: t.tool, calls: BigInt(t.calls), failed: BigInt(t.failed), lastUnixMs: BigInt(t.lastMs) })),
  read: { calls: BigInt(r.read.calls), paths: BigInt(r.read.paths), failed: BigInt(r.read.failed) },
  changed: { calls: BigInt(r.changed.calls), paths: BigInt(r.changed.paths), failed: BigInt(r.changed.failed) },
  run: { calls: BigInt(r.run.calls), paths: BigInt(r.run.paths), failed: BigInt(r.run.failed) },
  pendingJobs: r.pendingJobs.map((j) => ({ jobId: j.jobId, tool: j.tool, sinceUnixMs: BigInt(j.sinceMs) })),
  pendingJobsTotal: BigInt(r.pendingJobsTotal),
  recentCalls: r.recentCalls.map((c) => ({
    seq: BigInt(c.seq),
    tool: c.tool,
    outcome: c.outcome,
    reasonCode: c.reasonCode,
    atUnixMs: BigInt(c.atMs),
    recovered: c.recovered ?? "",
    parentCallId: c.parentCallId ?? "",
  })),
  validations: r.validations.map((v) => ({ seq: BigInt(v.seq), tool: v.tool, validation: v.validation, atUnixMs: BigInt(v.atMs) })),
  truncated: r.truncated,
});

const continuationToProto = (c: AgentContinuation) => ({ agentId: c.agentId, endpointId: c.endpointId, controllerGeneration: BigInt(c.controllerGeneration) });

const failed = (failure: ToolFailure) => ({ failure: failureToWire(failure) });

/** Wire int64 → JS number; anything beyond exact range is treated as a (never valid) huge value. */
const int = (v: bigint): number => (v > BigInt(Number.MAX_SAFE_INTEGER) || v < 0n ? Number.MAX_SAFE_INTEGER + 1 : Number(v));

/** Maps local caller errors to Connect codes; the message sent out stays generic. */
async function guarded<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (error instanceof ConnectError) throw error;
    if (error instanceof ProjectOwnershipError)
      throw new ConnectError("project not owned by the caller's client id", Code.PermissionDenied, undefined, undefined, error);
    if (error instanceof SessionCallRecordError)
      throw new ConnectError(`invalid session call record: ${error.message}`, Code.InvalidArgument, undefined, undefined, error);
    if (error instanceof RangeError) throw new ConnectError("invalid argument", Code.InvalidArgument, undefined, undefined, error);
    throw error;
  }
}

export function createRefResolver(deps: RefResolverDeps): ServiceImpl<typeof RefResolverService> {
  const projects = createProjectStore(deps.db, deps.liveCacheTtlMs !== undefined ? { liveCacheTtlMs: deps.liveCacheTtlMs } : {});
  const sessions = createSessionStore(deps.db, projects, deps.maxCallsPerSession !== undefined ? { maxCallsPerSession: deps.maxCallsPerSession } : {});
  const agents = createAgentStore(deps.db);
  const agentContinuations = createAgentContinuations({ db: deps.db, agents });
  const agentTasks = createAgentTasks({
    db: deps.db,
    projects,
    fences: deps.taskFences ?? createMemoryTaskFenceCounter(),
    bus: deps.agentEvents ?? createAgentEventBus(),
  });
  const validAddress = (clientId: string, projectId: string) => {
    if (!isCanonicalIdPart(clientId) || !isCanonicalIdPart(projectId)) throw new ConnectError("invalid client_id or project_id", Code.InvalidArgument);
  };
  const plans = createGoalPlanStore(deps.db);
  return {
    async putGoalPlan(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      // The gateway resolved and authorized the Project; a plan of another tenant's Project is refused.
      if (req.projectCanonicalId !== "" && !req.projectCanonicalId.startsWith(`agent:${principal.clientId}:`))
        throw new ConnectError("project not visible to this client", Code.PermissionDenied);
      const plan = await plans.put(principal, { projectCanonicalId: req.projectCanonicalId, goal: req.goal, stepsJson: req.stepsJson });
      return { planId: plan.planId, revision: BigInt(plan.revision), updatedAtUnixMs: BigInt(plan.updatedAtMs) };
    },
    // ── projects ──
    async registerProject(req) {
      const { project, newIncarnation } = await projects.register({
        clientId: req.clientId,
        projectId: req.projectId,
        rootIdentity: req.rootIdentity,
        name: req.name || req.projectId,
      });
      if (req.recoveredWrites.length > 0) await sessions.recordRecoveredWrites(project.canonicalId, req.recoveredWrites);
      return { project: toProto(project), newIncarnation };
    },
    async retireProject(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      validAddress(req.clientId, req.projectId);
      const outcome = await guarded(() => projects.retire(principal, { clientId: req.clientId, projectId: req.projectId }));
      return outcome.project ? { retired: outcome.retired, project: toProto(outcome.project) } : { retired: outcome.retired };
    },
    async setProjectVisibility(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      validAddress(req.clientId, req.projectId);
      return guarded(() => projects.setVisibility(principal, { clientId: req.clientId, projectId: req.projectId, subject: req.subject, visible: req.visible }));
    },
    async declareProject(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      if (!isProjectVisibility(req.visibility)) throw new ConnectError("visibility must be private or tenant", Code.InvalidArgument);
      const declared = await projects.declare(principal, { projectId: req.projectId, visibility: req.visibility });
      return declared.ok ? {} : failed(declared.failure);
    },
    async updateProject(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      if (!isProjectVisibility(req.visibility)) throw new ConnectError("visibility must be private or tenant", Code.InvalidArgument);
      const updated = await projects.update(principal, { selector: req.selector, visibility: req.visibility });
      return updated.ok ? { project: toProto(updated.project), changed: updated.changed } : failed(updated.failure);
    },
    async listProjects(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const page = await projects.list(principal, {
        ...(req.name !== "" ? { name: req.name } : {}),
        ...(req.limit > 0 ? { limit: req.limit } : {}),
        ...(req.cursor !== "" ? { cursor: req.cursor } : {}),
        ...(req.restrictToOnly ? { only: req.onlyCanonicalIds } : {}),
      });
      if (!page.ok) return failed(page.failure);
      return {
        projects: page.entries.map((e) => ({ project: toProto(e.project), projectRef: e.ref })),
        omitted: page.omitted,
        nextCursor: page.nextCursor ?? "",
      };
    },
    async resolveProject(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const resolution = req.manage ? await projects.resolveForManagement(principal, req.selector) : await projects.resolve(principal, req.selector);
      if (resolution.ok && req.recordUse) projects.recordUse(principal, resolution.project.canonicalId);
      return resolution.ok ? { project: toProto(resolution.project) } : failed(resolution.failure);
    },
    async issueProjectRef(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const issued = await projects.issueRef(principal, req.selector);
      return issued.ok ? { project: toProto(issued.project), projectRef: issued.ref } : failed(issued.failure);
    },

    // ── Workflow Sessions ──
    async createSession(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const created = await sessions.create(principal, { projectSelector: req.projectSelector, title: req.title });
      return created.ok ? { session: sessionToProto(created.session), sessionRef: created.sessionRef } : failed(created.failure);
    },
    async resolveSession(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const resolved = await sessions.resolve(principal, { selector: req.selector, projectCanonicalId: req.projectCanonicalId, requireOpen: req.requireOpen });
      return resolved.ok ? { session: sessionToProto(resolved.session), sessionRef: resolved.sessionRef } : failed(resolved.failure);
    },
    async closeSession(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const closed = await sessions.close(principal, req.selector);
      return closed.ok ? { session: sessionToProto(closed.session), closedNow: closed.closedNow } : failed(closed.failure);
    },
    async recordSessionCall(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const call = req.call;
      if (!call) throw new ConnectError("call is required", Code.InvalidArgument);
      if (!req.projectCanonicalId) throw new ConnectError("project_canonical_id is required", Code.InvalidArgument);
      const recorded = await guarded(() =>
        sessions.record(principal, {
          selector: req.sessionSelector,
          projectCanonicalId: req.projectCanonicalId,
          call: {
            callId: call.callId,
            tool: call.tool,
            effect: call.effect,
            outcome: call.outcome,
            reasonCode: call.reasonCode,
            detailCode: call.detailCode,
            pathsCount: call.pathsCount,
            changedPathsCount: call.changedPathsCount,
            jobId: call.jobId,
            jobState: call.jobState,
            durationMs: call.durationMs,
            ...(call.validation
              ? {
                  validation: {
                    status: call.validation.status,
                    testsPassed: call.validation.testsPassed,
                    testsFailed: call.validation.testsFailed,
                    testsSkipped: call.validation.testsSkipped,
                    errors: call.validation.errors,
                    warnings: call.validation.warnings,
                  },
                }
              : {}),
            paths: call.paths.map((p) => ({ path: p.path, readRevision: p.readRevision, changed: p.changed })),
            ...(call.commandSummary !== "" ? { commandSummary: call.commandSummary } : {}),
            ...(call.exitCode !== undefined ? { exitCode: call.exitCode } : {}),
            ...(call.parentCallId !== "" ? { parentCallId: call.parentCallId } : {}),
          },
        }),
      );
      return recorded.ok
        ? { recorded: recorded.recorded, seq: BigInt(recorded.seq), duplicate: recorded.duplicate, dropped: recorded.dropped }
        : failed(recorded.failure);
    },
    async latestProjectValidation(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const r = await sessions.latestValidation(principal, { projectCanonicalId: req.projectCanonicalId, selector: req.sessionSelector });
      if (!r.ok) return failed(r.failure);
      if (!r.latest) return {};
      const v = r.latest;
      return { sessionId: v.sessionId, latest: { seq: BigInt(v.seq), tool: v.tool, atUnixMs: BigInt(v.atMs), validation: v.validation } };
    },
    async readSessionHandoff(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const handoff = await sessions.handoff(principal, { selector: req.selector, maxRecentCalls: req.maxRecentCalls });
      if (!handoff.ok) return failed(handoff.failure);
      return {
        handoff: {
          session: sessionToProto(handoff.session),
          sessionRef: handoff.sessionRef,
          callsDropped: BigInt(handoff.session.callsDropped),
          ...recapToProto(handoff.recap),
          paths: handoff.lists.paths.map((p) => ({ path: p.path, readRevision: p.readRevision, changed: p.changed })),
          pathsTruncated: handoff.lists.pathsTruncated,
          commands: handoff.lists.commands.map((c) => ({
            tool: c.tool,
            commandSummary: c.commandSummary,
            outcome: c.outcome,
            ...(c.exitCode !== undefined ? { exitCode: c.exitCode } : {}),
          })),
          commandsTruncated: handoff.lists.commandsTruncated,
        },
      };
    },

    // ── agent continuations ──
    async rotateAgentEndpoint(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const r = await agents.rotateEndpoint(principal, {
        agentId: req.agentId,
        endpointId: req.endpointId,
        expectedGeneration: int(req.expectedControllerGeneration),
      });
      return r.ok ? { continuation: continuationToProto(r.continuation), agentContinuationRef: r.ref } : failed(r.failure);
    },
    async issueAgentContinuationRef(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const r = await agents.issueContinuationRef(principal, {
        agentId: req.agentId,
        endpointId: req.endpointId,
        expectedGeneration: int(req.expectedControllerGeneration),
      });
      return r.ok ? { continuation: continuationToProto(r.continuation), agentContinuationRef: r.ref } : failed(r.failure);
    },
    async resolveAgentContinuation(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const r = await agents.resolveContinuation(principal, {
        ref: req.agentContinuationRef,
        agentId: req.agentId,
        endpointId: req.endpointId,
        expectedGeneration: int(req.expectedControllerGeneration),
      });
      return r.ok ? { continuation: continuationToProto(r.continuation) } : failed(r.failure);
    },

    // ── Agents, Tasks and Attempts ──
    async callAgentTool(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      let args: unknown;
      try {
        args = JSON.parse(req.argumentsJson || "{}");
      } catch {
        throw new ConnectError("arguments_json is not JSON", Code.InvalidArgument);
      }
      if (!args || typeof args !== "object" || Array.isArray(args)) throw new ConnectError("arguments_json must be an object", Code.InvalidArgument);
      const input = args as Record<string, unknown>;
      if (agentContinuations.isContinuationTool(req.tool)) {
        const c = await agentContinuations.call(principal, req.tool, input);
        return c.ok ? { resultJson: JSON.stringify(c.result), continuationFacts: c.facts } : failed(c.failure);
      }
      const mayConsume = agentContinuations.mayConsume(principal, req.tool, input).catch(() => true);
      const r = await agentTasks.call(principal, req.tool, input, ctx.signal);
      // Continuation facts (fresh turn, consume) are observations: one that cannot be recorded
      // never fails the call it rides on.
      const continuationFacts = await agentContinuations
        .observe(principal, req.tool, input, r.ok ? r.value.result : undefined, await mayConsume)
        .catch(() => []);
      if (!r.ok) return { ...failed(r.failure), continuationFacts };
      return { resultJson: JSON.stringify(r.value.result), projectCanonicalId: r.value.projectCanonicalId ?? "", continuationFacts };
    },
    async admitAttemptRef(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const r = await agentTasks.admitAttemptRef(principal, req.attemptRef, req.projectCanonicalId);
      return r.ok ? { taskId: r.taskId, attemptId: r.attemptId, attemptFence: BigInt(r.fence) } : failed(r.failure);
    },
  };
}
