/**
 * The call pipeline, in one readable place:
 *   admit → normalize → resolve + authorize → execute → capture → project → record.
 * The audit record is captured from the canonical result before the late model projection;
 * the model sees sparse success, or a structured failure with at most one follow-up.
 */
import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import type { RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import {
  createSessionFollowUp, readAgentTaskFollowUp, FailureStage, failureFollowUpBuilder, forwardedCall, gatewayRefusal, groupToolNamesByCategory, inspectWorkspaceFollowUp,
  listProjectsFollowUp, modelVisible, normalizeToolCall, canonicalProjectId, parseCanonicalProjectId, projectSuccess, ReasonCode, rereadFollowUp, toolDefinition, toolFailure, toolRoute, waitForJobFollowUp, waitForProjectFollowUp,
} from "@webcodex/contracts";
import { DEFAULT_MODEL_WORKFLOW_POLICY } from "@webcodex/contracts";
import type { CanonicalCall, FailureStage as Stage, FollowUp, HostProfile, ModelWorkflowPolicy, InputNormalization, ToolCategory, ToolDefinition, ToolFailure } from "@webcodex/contracts";
import { argumentShape, createCallMetrics, failureFromWire, measureCanonical, measureProjection, principalHeaders, provenNotSent, withSpan } from "@webcodex/platform";
import type { ArgumentShapeSketch, Logger, Metrics, ShapeSchema } from "@webcodex/platform";
import type { Caller } from "./auth.js";
import type { ActionRecordInit, AuditRecorder } from "./audit-recorder.js";
import type { AdmittedCatalog, CatalogCache } from "./catalog-cache.js";
import { handoffView, sessionCallFacts, validationVerdict } from "./session-facts.js";
import { checkToolScope } from "./auth/scopes.js";
import { createPresentation, presentationText } from "./presentation.js";
import type { ResolveProject } from "./presentation.js";
import { attentionItems, createJobAttention, jobFactsOf, jobsOfCall, watchKey } from "./job-attention.js";
import type { JobAttention, JobAttentionItem } from "./job-attention.js";

export interface PipelineDeps {
  catalogs: CatalogCache;
  refResolver: Client<typeof RefResolverService>;
  broker: Client<typeof RunnerBrokerService>;
  audit: AuditRecorder;
  /** The Host profile of callers whose token names none. */
  hostProfile: HostProfile;
  serverInfo: { name: string; version: string; mode: "embedded" | "distributed" };
  logger: Logger;
  metrics?: Metrics;
  /** Deployment facts reported by presentation cards (default: DEFAULT_MODEL_WORKFLOW_POLICY). */
  workflowPolicy?: ModelWorkflowPolicy;
  /** Longest a call waits for its Workflow Session record before answering anyway (default 1000 ms). */
  sessionRecordBudgetMs?: number;
  /** The Jobs callers started and have not seen end (default: a fresh in-process watch list). */
  jobAttention?: JobAttention;
}

export type Outcome = { ok: true; result: Record<string, unknown> } | { ok: false; failure: ToolFailure };

export interface ModelResult {
  structuredContent: Record<string, unknown>;
  isError: boolean;
  /** The text content when it is not the JSON of structuredContent (presentation results). */
  text?: string;
  /** Called by the transport once the result was handed to the caller's connection. */
  delivered?: () => void;
}

interface CallContext {
  caller: Caller;
  catalog: AdmittedCatalog;
  signal: AbortSignal;
  stages: Record<string, number>;
  projectCanonicalId: string;
  /** Canonical wc_sess_* the call is recorded into (or targets), once resolved and authorized; else "". */
  sessionId: string;
  /** The call without its rewrite to another tool, which the broker may run instead (run_process for run_shell). */
  literal?: CanonicalCall | undefined;
  /** Set when the broker answered for `literal` (the Runner lacked a capability the rewrite needs): the tool that ran. */
  ranLiteral?: ToolDefinition | undefined;
  /** Ended Jobs of this caller and project the result may carry, and whose watch list they are on. */
  attention?: { key: string; items: JobAttentionItem[] } | undefined;
}

/** A project tool's arguments as the Runner gets them: the target and Session are the gateway's. */
function runnerArguments(args: Record<string, unknown>): Record<string, unknown> {
  const { project: _p, session_id: _s, attempt_ref: _a, ...rest } = args;
  return rest;
}

const now = () => performance.now();
const micros = (since: number) => Math.round((now() - since) * 1000);

/** The pipeline stages, each a child span of the call's `tools/call` span. */
type StageName = "normalize" | "resolve" | "dispatch" | "project" | "record";

/** Runs `fn` as one pipeline stage (a child span of the call's span) and stores its duration (µs) in `stages`. */
async function timedStage<T>(stages: Record<string, number>, name: StageName, fn: () => T | Promise<T>): Promise<T> {
  const t = now();
  try {
    return await withSpan(name, { "webcodex.stage": name }, async () => fn());
  } finally {
    stages[name] = micros(t);
  }
}

/**
 * The failure the Host gets when an effectful call ran but its audit record is neither stored
 * nor spooled: the call is not acknowledged as a success, and what is known about the effect
 * is stated as it is, so the model does not repeat a change that already happened.
 */
function auditNotDurableFailure(outcome: Outcome, stateChanged: boolean, outcomeUnknown: boolean): ToolFailure {
  const effect = outcomeUnknown
    ? "its effect is unknown: inspect the project before retrying"
    : stateChanged ? "it did change the project: do not repeat it" : "it changed nothing";
  return toolFailure(ReasonCode.dependencyUnavailable, FailureStage.record, {
    detail_code: "audit_not_durable",
    state_changed: stateChanged,
    outcome_unknown: outcomeUnknown,
    evidence: outcome.ok ? { call_outcome: "success" } : { call_outcome: "failure", call_reason_code: outcome.failure.reason_code },
    message: `The call ran but its audit record could not be stored; ${effect}.`,
  });
}

/** What the pipeline sets on a call's span: codes and identifiers only. */
type CallSpan = { setAttribute(key: string, value: string): unknown } | undefined;

/**
 * The audit record of a call refused before the pipeline (scope, rate limit): the same fields a
 * pipeline failure records, under the tool call_runtime_tool would have run.
 */
export function refusedCallRecord(caller: Caller, requestedTool: string, requestedArgs: unknown, failure: ToolFailure): ActionRecordInit {
  const { tool, args } = forwardedCall(requestedTool, requestedArgs);
  const def = toolDefinition(tool);
  const shape = argumentShape(args, def?.inputSchema as ShapeSchema | undefined);
  return {
    callId: randomUUID(), clientId: caller.principal.clientId, subject: caller.principal.subject, tool: def?.name ?? "unknown_tool",
    projectCanonicalId: "", sessionId: "", effect: def?.effect ?? "read_only", outcome: "failure", reasonCode: failure.reason_code,
    failureStage: failure.failure_stage, ...(shape ? { argumentShape: shape } : {}),
    stateChanged: false, outcomeUnknown: false, inputNormalizationCode: "", startedAtUnixMs: BigInt(Date.now()), durationUs: 0, stageDurationsUs: {},
  };
}

/**
 * The admission of a call: the catalog it was admitted against, or the failure that refused
 * it; either way the tool and arguments it is audited under (call_runtime_tool unwrapped).
 */
type Admission =
  | { ok: true; catalog: AdmittedCatalog; tool: string; args: unknown }
  | { ok: false; failure: ToolFailure; tool: string; args: unknown };

/** The caller's own project selector, from the normalized arguments or, before normalization, the raw ones. */
function projectSelector(args: Record<string, unknown>, rawArgs: unknown): string | undefined {
  const own = args["project"];
  if (typeof own === "string") return own;
  const raw = typeof rawArgs === "object" && rawArgs !== null ? (rawArgs as Record<string, unknown>)["project"] : undefined;
  return typeof raw === "string" && raw !== "" ? raw : undefined;
}

/**
 * Maps a transport/dependency error to a failure that says what is known about the effect. An
 * effectful dispatch may say "nothing was run" only when the request provably never left (the
 * connection was refused or never established); any other error, whatever its Connect code,
 * leaves the effect unknown.
 */
function dependencyFailure(error: unknown, stage: Stage, effectful: boolean): ToolFailure {
  const ce = ConnectError.from(error);
  const unknown = stage === FailureStage.dispatch && effectful && !provenNotSent(error);
  return toolFailure(ReasonCode.dependencyUnavailable, stage, {
    detail_code: Code[ce.code]?.toLowerCase() ?? "unknown",
    outcome_unknown: unknown,
    message: `A platform dependency failed during ${stage}; ${unknown ? "the effect is unknown: inspect before retrying" : "nothing was run"}.`,
  });
}

/**
 * The recovery follow-up a failure carries, as the reason-code table names it, built from
 * what the call and the failure's evidence prove (the caller's own project selector, the
 * path the evidence names). A failure that already carries one keeps it; a row whose inputs
 * are not known here (no project, no single path, an effect that cannot have happened)
 * carries none, as the table records.
 */
export function withRecovery(failure: ToolFailure, project: string | undefined): ToolFailure {
  if (failure.follow_up) return failure;
  const builder = failureFollowUpBuilder(failure.reason_code, failure.detail_code);
  const path = typeof failure.evidence?.["path"] === "string" ? (failure.evidence["path"] as string) : undefined;
  let followUp: FollowUp | undefined;
  switch (builder) {
    case "listProjectsFollowUp":
      followUp = listProjectsFollowUp();
      break;
    case "rereadFollowUp":
      if (project !== undefined && path !== undefined) followUp = rereadFollowUp(project, path);
      break;
    case "inspectWorkspaceFollowUp":
      if (project !== undefined && failure.outcome_unknown) followUp = inspectWorkspaceFollowUp(project);
      break;
    case "createSessionFollowUp":
      if (project !== undefined) followUp = createSessionFollowUp(project);
      break;
    case "readAgentTaskFollowUp": {
      const taskId = failure.evidence?.["task_id"];
      if (typeof taskId === "string") followUp = readAgentTaskFollowUp(taskId);
      break;
    }
    case "waitForProjectFollowUp":
      if (project !== undefined) followUp = waitForProjectFollowUp(project);
      break;
    case "waitForJobFollowUp":
    case "listAgentTasksFollowUp":
    case "waitForAgentEventsFollowUp":
    case undefined:
      break;
  }
  return followUp ? { ...failure, follow_up: followUp } : failure;
}

export function createPipeline(deps: PipelineDeps) {
  const callMetrics = deps.metrics ? createCallMetrics(deps.metrics) : undefined;
  const presentation = createPresentation({ refResolver: deps.refResolver, broker: deps.broker, policy: deps.workflowPolicy ?? DEFAULT_MODEL_WORKFLOW_POLICY });

  /** Resolves and authorizes a Project selector for a presentation call, recording it for audit. */
  const resolveFor = (ctx: CallContext): ResolveProject => async (selector) => {
    const resolved = await timedStage(ctx.stages, "resolve", () => deps.refResolver.resolveProject({ selector }, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) }));
    if (resolved.failure || !resolved.project) return { ok: false, failure: resolved.failure ? failureFromWire(resolved.failure) : toolFailure(ReasonCode.projectNotFound, FailureStage.resolution) };
    ctx.projectCanonicalId = resolved.project.canonicalId;
    return { ok: true, canonicalId: resolved.project.canonicalId, rootIdentity: resolved.project.rootIdentity };
  };

  const attention = deps.jobAttention ?? createJobAttention();

  /**
   * The watched Jobs of this caller and project that have ended, from one observe_jobs on the
   * project's Runner; secondary to the call, so a failure means no attention this time.
   */
  async function endedJobs(jobIds: string[], project: { canonicalId: string; rootIdentity: string }, ctx: CallContext): Promise<JobAttentionItem[]> {
    try {
      const res = await deps.broker.dispatch(
        { callId: randomUUID(), projectCanonicalId: project.canonicalId, rootIdentity: project.rootIdentity, tool: "observe_jobs", argumentsJson: JSON.stringify({ job_ids: jobIds }) },
        { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
      );
      return res.failure ? [] : attentionItems(JSON.parse(res.resultJson));
    } catch (error) {
      deps.logger.debug("job attention not observed", { error: ConnectError.from(error).message });
      return [];
    }
  }

  async function runGatewayTool(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    switch (def.name) {
      case "list_tools": {
        // App-only card helpers are not part of the model's discovery.
        const admitted = [...ctx.catalog.admitted.values()].filter(modelVisible);
        const groups = groupToolNamesByCategory(admitted);
        // The schema's enum has already rejected an unknown category; a known one may be empty.
        const category = args["category"] as ToolCategory | undefined;
        if (category !== undefined) return { ok: true, result: { categories: groups[category] ? { [category]: groups[category] } : {} } };
        return { ok: true, result: { categories: groups } };
      }
      case "read_tool_manifest": {
        const name = args["tool"] as string;
        const admittedTarget = ctx.catalog.admitted.get(name);
        const target = admittedTarget && modelVisible(admittedTarget) ? admittedTarget : undefined;
        if (!target) {
          const known = toolDefinition(name) !== undefined;
          return {
            ok: false,
            failure: toolFailure(known ? ReasonCode.toolNotAdmitted : ReasonCode.unknownTool, FailureStage.admission, {
              detail_code: known ? "not_admitted" : "unknown_tool",
              evidence: { field: "/tool" },
              message: known ? "This tool is not admitted for you; see list_tools." : "No tool has this name; see list_tools.",
            }),
          };
        }
        return { ok: true, result: { tool: target.name, category: target.category, description: target.description, input_schema: target.inputSchema, route: toolRoute(target) } };
      }
      case "get_runtime_status":
        return runtimeStatus(args, ctx);
      case "create_project":
        return createProject(args, ctx);
      case "wait_for_project_ready": {
        const address = parseCanonicalProjectId(args["project"] as string);
        if (!address || address.clientId !== ctx.caller.principal.clientId) return { ok: false, failure: toolFailure(ReasonCode.projectNotFound, FailureStage.resolution, { message: "No such project for this caller; call list_projects." }) };
        return awaitProjectReady(address.projectId, (args["wait_ms"] as number | undefined) ?? 10_000, ctx);
      }
      case "delete_project":
        return deleteProject(args, ctx);
      default:
        return { ok: false, failure: toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_gateway_handler" }) };
    }
  }

  /**
   * create_project: the ref-resolver records the owner and visibility of the new address, the
   * broker's provisioner starts its Runner (which clones the repository with the tenant's
   * credential); then the call waits up to wait_ms for the Project to be ready.
   */
  async function createProject(args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const options = { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) };
    const name = args["name"] as string;
    const source = args["source"] as { git?: { url: string; ref?: string }; empty?: Record<string, never> };
    const declared = await deps.refResolver.declareProject({ projectId: name, name, visibility: (args["visibility"] as string | undefined) ?? "private" }, options);
    if (declared.failure) return { ok: false, failure: failureFromWire(declared.failure) };
    ctx.projectCanonicalId = canonicalProjectId(ctx.caller.principal.clientId, name);
    try {
      await deps.broker.ensureProjectRunner({ clientId: ctx.caller.principal.clientId, projectId: name, sourceGitUrl: source.git?.url ?? "", sourceGitRef: source.git?.ref ?? "", createWorkspace: true }, options);
    } catch (error) {
      if (ConnectError.from(error).code === Code.FailedPrecondition) {
        return { ok: false, failure: toolFailure(ReasonCode.dependencyUnavailable, FailureStage.dispatch, { detail_code: "no_provisioner", message: "This deployment cannot create projects (no Runner provisioner is configured); nothing was created." }) };
      }
      return { ok: false, failure: dependencyFailure(error, FailureStage.dispatch, true) };
    }
    return awaitProjectReady(name, (args["wait_ms"] as number | undefined) ?? 10_000, ctx);
  }

  /**
   * Ready: the caller can resolve the Project and its Runner takes calls. Failed: the
   * provisioner's structured reason. Otherwise pending once wait_ms has passed.
   */
  async function awaitProjectReady(projectId: string, waitMs: number, ctx: CallContext): Promise<Outcome> {
    const options = { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) };
    const clientId = ctx.caller.principal.clientId;
    const id = canonicalProjectId(clientId, projectId);
    const deadline = now() + waitMs;
    for (;;) {
      const provisioning = await deps.broker.getProjectProvisioning({ clientId, projectId }, options);
      if (provisioning.state === "failed" && provisioning.failure) {
        // Nothing is left behind: the Runner (a crash-looping pod, say) and its volume go.
        await deps.broker.removeProjectRunner({ clientId, projectId, keepWorkspace: false }, options).catch((error: unknown) => deps.logger.warn("cleanup after a failed create_project failed", { error: ConnectError.from(error).message }));
        return { ok: false, failure: failureFromWire(provisioning.failure) };
      }
      if (provisioning.state === "unschedulable" && provisioning.failure) return { ok: false, failure: failureFromWire(provisioning.failure) };
      const issued = await deps.refResolver.issueProjectRef({ selector: id }, options);
      if (!issued.failure && issued.project) {
        const states = await runnerStates([issued.project], ctx);
        if (states[id] === "ready") return { ok: true, result: { project_ref: issued.projectRef, project_id: id } };
      } else if (provisioning.state === "unknown" || provisioning.state === "ready") {
        return { ok: false, failure: toolFailure(ReasonCode.projectNotFound, FailureStage.resolution, { message: "No such project for this caller; call list_projects." }) };
      }
      const left = deadline - now();
      if (left <= 0) return { ok: true, result: { project_id: id, project_state: "pending" } };
      await new Promise((r) => setTimeout(r, Math.min(100, left)));
    }
  }

  /** delete_project: its owner or a tenant admin stops its Runner, then retires it (refs fail closed). */
  async function deleteProject(args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const options = { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) };
    const resolved = await deps.refResolver.resolveProject({ selector: args["project"] as string }, options);
    if (resolved.failure || !resolved.project) return { ok: false, failure: resolved.failure ? failureFromWire(resolved.failure) : toolFailure(ReasonCode.projectNotFound, FailureStage.resolution) };
    const project = resolved.project;
    ctx.projectCanonicalId = project.canonicalId;
    if (project.ownerSubject !== ctx.caller.principal.subject && !ctx.caller.principal.tenantAdmin) {
      return { ok: false, failure: toolFailure(ReasonCode.notProjectOwner, FailureStage.authorization, { message: "Only the project's owner or a tenant admin may delete it." }) };
    }
    const keep = args["keep_workspace"] === true;
    try {
      await deps.broker.removeProjectRunner({ clientId: project.clientId, projectId: project.projectId, keepWorkspace: keep }, options);
    } catch (error) {
      if (ConnectError.from(error).code !== Code.FailedPrecondition) return { ok: false, failure: dependencyFailure(error, FailureStage.dispatch, true) };
    }
    await deps.refResolver.retireProject({ clientId: project.clientId, projectId: project.projectId }, options);
    return { ok: true, result: { project_id: project.canonicalId, ...(keep ? { workspace_kept: true } : {}) } };
  }

  /**
   * get_runtime_status: projected from the broker's canonical fleet summary (one counting
   * path for both modes). Compact asks the broker for the summary only, so no Runner row is
   * built; compact: false adds the diagnostic rows, catalog version and audit backlog.
   */
  async function runtimeStatus(args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const compact = args["summary_only"] === true || args["compact"] !== false;
    let fleet;
    try {
      fleet = await deps.broker.getFleetStatus({ clientId: ctx.caller.principal.clientId, summaryOnly: compact }, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) });
    } catch (error) {
      return { ok: false, failure: dependencyFailure(error, FailureStage.dispatch, false) };
    }
    const s = fleet.summary;
    const jobs = s?.jobs;
    const status: Record<string, unknown> = {
      server: deps.serverInfo,
      host_profile: ctx.caller.hostProfile ?? deps.hostProfile,
      runners: { total: s?.runnersTotal ?? 0, connected: s?.runnersConnected ?? 0, lost: s?.runnersLost ?? 0, standby: s?.runnersStandby ?? 0 },
      projects: { total: s?.projectsTotal ?? 0, routable: s?.projectsRoutable ?? 0 },
      jobs: {
        active: jobs?.active ?? 0, running: jobs?.running ?? 0, queued: jobs?.queued ?? 0,
        recovering: jobs?.recovering ?? 0, lost_after_reconcile: jobs?.lostAfterReconcile ?? 0,
      },
      protocol: { server_generation: s?.serverProtocolGeneration ?? 0, generations: s?.protocolGenerations ?? [], aligned: s?.protocolAligned ?? true },
      build: { builds: s?.builds ?? [], aligned: s?.buildAligned ?? true },
      connection_states: { ...(s?.connectionStates ?? {}) },
      concurrency: { project_limit: s?.projectConcurrencyLimit ?? 0, in_flight: s?.inFlight ?? 0 },
    };
    if ((s?.baselineFaults ?? 0) > 0) status["baseline_faults"] = s?.baselineFaults;
    if (compact) return { ok: true, result: status };
    status["runner_details"] = fleet.runners.map((r) => ({
      runner_id: r.runnerId, project_id: r.projectId, project_canonical_id: r.projectCanonicalId, connection_state: r.connectionState,
      protocol_generation: r.protocolGeneration, build: r.build, capabilities: r.capabilities, baseline_complete: r.baselineComplete,
      lease_held: r.leaseHeld, fence: Number(r.fence), in_flight: r.inFlight, last_heartbeat: new Date(Number(r.lastHeartbeatUnixMs)).toISOString(),
    }));
    status["catalog_version"] = ctx.catalog.version;
    status["audit_backlog"] = deps.audit.backlog();
    return { ok: true, result: status };
  }

  /**
   * A project tool call. With session_id, the Session is resolved against the resolved
   * Project (authority, visibility, lifecycle) before anything is dispatched, and the outcome
   * is recorded into it afterwards. Only the call's own session_id selects a Session.
   */
  async function runOnRunner(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext, callId: string): Promise<Outcome> {
    const started = now();
    const selector = args["project"] as string;
    let resolved;
    try {
      resolved = await timedStage(ctx.stages, "resolve", () => deps.refResolver.resolveProject({ selector }, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) }));
    } catch (error) {
      return { ok: false, failure: dependencyFailure(error, FailureStage.resolution, false) };
    }
    if (resolved.failure || !resolved.project) return { ok: false, failure: resolved.failure ? failureFromWire(resolved.failure) : toolFailure(ReasonCode.projectNotFound, FailureStage.resolution) };
    const project = resolved.project;
    ctx.projectCanonicalId = project.canonicalId;
    const sessionSelector = args["session_id"] as string | undefined;
    if (sessionSelector !== undefined) {
      const failure = await resolveSession(sessionSelector, project.canonicalId, ctx);
      if (failure) return { ok: false, failure };
    }
    // attempt_ref: admitted only while that Attempt holds its Task's fence; else nothing runs.
    const attemptRef = args["attempt_ref"] as string | undefined;
    if (attemptRef !== undefined) {
      const failure = await admitAttempt(attemptRef, project.canonicalId, ctx);
      if (failure) return { ok: false, failure };
    }
    const key = watchKey(ctx.caller.principal.clientId, ctx.caller.principal.subject, project.canonicalId);
    const watched = attention.watched(key, jobsOfCall(def.name, args));
    const [outcome, items] = await Promise.all([
      dispatchToRunner(def, runnerArguments(args), project, ctx, callId),
      watched.length > 0 ? endedJobs(watched, project, ctx) : Promise.resolve([]),
    ]);
    if (outcome.ok) {
      const facts = jobFactsOf((ctx.ranLiteral ?? def).name, args, outcome.result);
      if (facts.started !== undefined) attention.watch(key, facts.started);
      if (facts.ended.length > 0) attention.seen(key, facts.ended);
    }
    if (items.length > 0) ctx.attention = { key, items };
    if (ctx.sessionId !== "") await recordSessionCall(ctx.ranLiteral ?? def, outcome, ctx, callId, Math.round(now() - started), args);
    return outcome;
  }

  /** Re-runs an attempt_ref's owner, lifecycle, lease, fence and generation checks for this Project; a failure means no dispatch. */
  async function admitAttempt(attemptRef: string, projectCanonicalId: string, ctx: CallContext): Promise<ToolFailure | undefined> {
    const t = now();
    try {
      const res = await deps.refResolver.admitAttemptRef({ attemptRef, projectCanonicalId }, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) });
      return res.failure ? failureFromWire(res.failure) : undefined;
    } catch (error) {
      return dependencyFailure(error, FailureStage.authorization, false);
    } finally {
      ctx.stages["admit_attempt"] = micros(t);
    }
  }

  /** Canonicalizes and authorizes a business session_id for `projectCanonicalId`; a failure means no dispatch. */
  async function resolveSession(selector: string, projectCanonicalId: string, ctx: CallContext): Promise<ToolFailure | undefined> {
    const t = now();
    try {
      const res = await deps.refResolver.resolveSession({ selector, projectCanonicalId, requireOpen: true }, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) });
      if (res.failure || !res.session) return res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.invalidValue, FailureStage.resolution, { detail_code: "session_not_found" });
      ctx.sessionId = res.session.sessionId;
      return undefined;
    } catch (error) {
      return dependencyFailure(error, FailureStage.resolution, false);
    } finally {
      ctx.stages["resolve_session"] = micros(t);
    }
  }

  /**
   * Secondary to the business result: bounded by sessionRecordBudgetMs, independent of the
   * caller's cancellation, and a failure is logged, never returned.
   */
  async function recordSessionCall(def: ToolDefinition, outcome: Outcome, ctx: CallContext, callId: string, durationMs: number, args: Record<string, unknown>): Promise<void> {
    const t = now();
    const facts = sessionCallFacts(def, outcome, args);
    // A ref'd timer (AbortSignal.timeout is unref'd): the budget holds even on an idle loop.
    const budget = new AbortController();
    const timer = setTimeout(() => budget.abort(), deps.sessionRecordBudgetMs ?? 1_000);
    try {
      const res = await deps.refResolver.recordSessionCall(
        { sessionSelector: ctx.sessionId, projectCanonicalId: ctx.projectCanonicalId, call: { callId, tool: def.name, effect: def.effect, durationMs, ...facts } },
        { signal: budget.signal, headers: principalHeaders(ctx.caller.principal) },
      );
      if (res.failure) deps.logger.warn("session call not recorded", { call_id: callId, session_id: ctx.sessionId, reason_code: res.failure.reasonCode, detail_code: res.failure.detailCode });
    } catch (error) {
      deps.logger.warn("session call not recorded", { call_id: callId, session_id: ctx.sessionId, error: ConnectError.from(error).message });
    } finally {
      clearTimeout(timer);
      ctx.stages["record_session"] = micros(t);
    }
  }

  async function dispatchToRunner(
    def: ToolDefinition, runnerArgs: Record<string, unknown>, project: { canonicalId: string; rootIdentity: string }, ctx: CallContext, callId: string,
  ): Promise<Outcome> {
    const fallback = ctx.literal ? { tool: ctx.literal.tool, argumentsJson: JSON.stringify(runnerArguments(ctx.literal.arguments)) } : undefined;
    try {
      const res = await timedStage(ctx.stages, "dispatch", () => deps.broker.dispatch(
        { callId, projectCanonicalId: project.canonicalId, rootIdentity: project.rootIdentity, tool: def.name, argumentsJson: JSON.stringify(runnerArgs), ...(fallback ? { fallback } : {}) },
        { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
      ));
      if (res.answeredFallback && ctx.literal) ctx.ranLiteral = toolDefinition(ctx.literal.tool);
      if (res.failure) return { ok: false, failure: failureFromWire(res.failure) };
      return { ok: true, result: JSON.parse(res.resultJson) as Record<string, unknown> };
    } catch (error) {
      return { ok: false, failure: dependencyFailure(error, FailureStage.dispatch, def.effect !== "read_only") };
    }
  }

  /**
   * list_projects' runner_state for all listed Projects in one broker call. The listing does
   * not fail when the broker cannot answer: every state is then "unknown", not "none".
   */
  async function runnerStates(projects: ReadonlyArray<{ canonicalId: string; rootIdentity: string }>, ctx: CallContext): Promise<Record<string, string>> {
    if (projects.length === 0) return {};
    try {
      const res = await deps.broker.getProjectRunnerStates(
        { projects: projects.map((p) => ({ projectCanonicalId: p.canonicalId, rootIdentity: p.rootIdentity })) },
        { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
      );
      return res.states;
    } catch (error) {
      deps.logger.warn("runner states unavailable for list_projects", { error: ConnectError.from(error).message });
      return {};
    }
  }

  async function runOnRefResolver(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const options = { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) };
    switch (def.name) {
      case "list_projects": {
        const res = await deps.refResolver.listProjects({}, options);
        const states = await runnerStates(res.projects.flatMap((p) => (p.project ? [p.project] : [])), ctx);
        const listed = res.projects.map((p) => {
          const id = p.project?.canonicalId ?? "";
          return { project_ref: p.projectRef, project_id: id, name: p.project?.name ?? "", runner_state: states[id] ?? "unknown" };
        });
        // Embedded mode serves one project root per process: a project of an earlier run that no
        // Runner here can serve (runner_state none) is not offered to the model, which would pick
        // it and fail. Its ref is kept for when it is served again.
        return { ok: true, result: { projects: deps.serverInfo.mode === "embedded" ? listed.filter((p) => p.runner_state !== "none") : listed } };
      }
      case "create_session": {
        const res = await deps.refResolver.createSession({ projectSelector: args["project"] as string, title: (args["title"] as string | undefined) ?? "" }, options);
        if (res.failure || !res.session) return { ok: false, failure: res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_session" }) };
        ctx.projectCanonicalId = res.session.projectCanonicalId;
        ctx.sessionId = res.session.sessionId;
        return { ok: true, result: { session_ref: res.sessionRef, session_id: res.session.sessionId } };
      }
      case "update_project": {
        const res = await deps.refResolver.updateProject({ selector: args["project"] as string, visibility: args["visibility"] as string }, options);
        if (res.failure || !res.project) return { ok: false, failure: res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_project" }) };
        ctx.projectCanonicalId = res.project.canonicalId;
        return { ok: true, result: { project_id: res.project.canonicalId, visibility: res.project.visibility, ...(res.changed ? {} : { unchanged: true }) } };
      }
      case "close_session": {
        const res = await deps.refResolver.closeSession({ selector: args["session_id"] as string }, options);
        if (res.failure || !res.session) return { ok: false, failure: res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_session" }) };
        ctx.projectCanonicalId = res.session.projectCanonicalId;
        ctx.sessionId = res.session.sessionId;
        return { ok: true, result: { session_id: res.session.sessionId, state: res.session.state, ...(res.closedNow ? {} : { closed_now: false }) } };
      }
      case "read_session_handoff": {
        const res = await deps.refResolver.readSessionHandoff({ selector: args["session_id"] as string }, options);
        if (res.failure || !res.handoff) return { ok: false, failure: res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_handoff" }) };
        ctx.projectCanonicalId = res.handoff.session?.projectCanonicalId ?? "";
        ctx.sessionId = res.handoff.session?.sessionId ?? "";
        return { ok: true, result: handoffView(res.handoff) };
      }
      default: {
        if (def.category !== "agents") return { ok: false, failure: toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_handler" }) };
        const res = await deps.refResolver.callAgentTool({ tool: def.name, argumentsJson: JSON.stringify(args) }, options);
        ctx.projectCanonicalId = res.projectCanonicalId;
        if (res.failure) return { ok: false, failure: failureFromWire(res.failure) };
        return { ok: true, result: JSON.parse(res.resultJson) as Record<string, unknown> };
      }
    }
  }

  async function execute(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext, callId: string): Promise<Outcome> {
    if (def.category === "presentation") {
      const presented = presentation.run(def, args, resolveFor(ctx), { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) });
      if (presented) return presented;
    }
    switch (def.execution) {
      case "gateway":
        return runGatewayTool(def, args, ctx);
      case "ref_resolver":
        try {
          return await timedStage(ctx.stages, "resolve", () => runOnRefResolver(def, args, ctx));
        } catch (error) {
          // create_session writes: a lost answer leaves its effect unknown.
          return { ok: false, failure: dependencyFailure(error, def.effect === "read_only" ? FailureStage.resolution : FailureStage.dispatch, def.effect !== "read_only") };
        }
      case "runner":
        return runOnRunner(def, args, ctx, callId);
      case "broker":
        return { ok: false, failure: toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_handler" }) };
    }
  }

  /**
   * Builds the model result of an outcome: the late, pure projection. It never writes into the
   * canonical result; a pending run gets its one wait_for_job_terminal follow-up here.
   */
  function project(def: ToolDefinition | undefined, outcome: Outcome, normalization: InputNormalization | undefined, args: Record<string, unknown>): ModelResult {
    if (!outcome.ok) return { structuredContent: outcome.failure as unknown as Record<string, unknown>, isError: true };
    const canonical = outcome.result;
    const pendingJob = canonical["execution_state"] === "pending" && typeof canonical["job_id"] === "string" ? canonical["job_id"] : undefined;
    const pendingProject = canonical["project_state"] === "pending" && typeof canonical["project_id"] === "string" ? canonical["project_id"] : undefined;
    const followUp = pendingJob !== undefined
      ? waitForJobFollowUp(args["project"] as string, pendingJob, args["session_id"] as string | undefined)
      : pendingProject !== undefined ? waitForProjectFollowUp(pendingProject) : undefined;
    const extras = { ...(normalization ? { normalization } : {}), ...(followUp ? { followUp } : {}) };
    const result = def ? projectSuccess(def, canonical, extras) : { ...canonical };
    const text = def?.direct !== undefined && def.category === "presentation" ? presentationText(def.name, args, result) : undefined;
    return { structuredContent: result, isError: false, ...(text !== undefined ? { text } : {}) };
  }

  /**
   * Admission: the caller's catalog, and the unwrapping of call_runtime_tool so the inner call
   * is normalized, authorized and audited as itself. A refusal names the tool it refused (the
   * inner one when call_runtime_tool forwarded a known tool).
   */
  async function admit(caller: Caller, tool: string, rawArgs: unknown): Promise<Admission> {
    // Defence in depth: the HTTP layer answers these with 403 before the pipeline runs.
    const missingScope = checkToolScope(caller, tool, rawArgs);
    if (missingScope) return { ok: false, failure: missingScope, ...forwardedCall(tool, rawArgs) };
    let catalog: AdmittedCatalog;
    try {
      catalog = await deps.catalogs.get(caller.admissionProfile, caller.hostProfile ?? deps.hostProfile);
    } catch (error) {
      return { ok: false, failure: dependencyFailure(error, FailureStage.admission, false), tool, args: rawArgs };
    }
    if (tool !== "call_runtime_tool" || !catalog.admitted.has(tool)) return { ok: true, catalog, tool, args: rawArgs };
    const outer = normalizeToolCall(tool, rawArgs, { isAdmitted: (n) => catalog.admitted.has(n) });
    if (!outer.ok) return { ok: false, failure: outer.failure, tool, args: rawArgs };
    const inner = outer.arguments["tool"] as string;
    const innerArgs = outer.arguments["arguments"];
    const refusal = gatewayRefusal(inner);
    if (refusal) {
      const failure = toolFailure(refusal.reason_code, FailureStage.admission, { detail_code: refusal.detail_code, evidence: { field: "/tool" }, message: refusal.message });
      return { ok: false, failure, tool: inner, args: innerArgs };
    }
    return { ok: true, catalog, tool: inner, args: innerArgs };
  }

  /** Runs a normalized call; an unexpected throw becomes a failure so the call is still audited. */
  async function executeSafely(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext, callId: string): Promise<Outcome> {
    try {
      return await execute(def, args, ctx, callId);
    } catch (error) {
      const effectful = def.effect !== "read_only";
      if (error instanceof ConnectError) {
        deps.logger.warn("tool call dependency failed", { tool: def.name, error: error.message });
        return { ok: false, failure: dependencyFailure(error, FailureStage.dispatch, effectful) };
      }
      deps.logger.error("tool call failed unexpectedly", { tool: def.name, error });
      return { ok: false, failure: toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "unhandled_error", outcome_unknown: effectful }) };
    }
  }

  /**
   * Runs one tools/call in a `tools/call` span with a child span per stage. Every call, refused
   * or not, produces exactly one ActionAudit record, captured from the canonical outcome before
   * the Host sees anything; an effectful call is acknowledged only once its record is durable.
   */
  function call(caller: Caller, tool: string, rawArgs: unknown, signal: AbortSignal): Promise<ModelResult> {
    return withSpan("tools/call", { "webcodex.client_id": caller.principal.clientId }, (span) => runCall(caller, tool, rawArgs, signal, span));
  }

  async function runCall(caller: Caller, requestedTool: string, requestedArgs: unknown, signal: AbortSignal, span: CallSpan): Promise<ModelResult> {
    const started = Date.now();
    const t0 = now();
    const stages: Record<string, number> = {};
    const callId = randomUUID();

    const admission = await admit(caller, requestedTool, requestedArgs);
    const { tool, args: rawArgs } = admission;
    // The shape of the arguments as received (after unwrapping, before normalization).
    const shape: ArgumentShapeSketch | undefined = argumentShape(rawArgs, toolDefinition(tool)?.inputSchema as ShapeSchema | undefined);

    let def = toolDefinition(tool);
    let outcome: Outcome;
    let normalization: InputNormalization | undefined;
    let args: Record<string, unknown> = {};
    let projectCanonicalId = "";
    let sessionId = "";
    let jobAttention: CallContext["attention"];
    if (!admission.ok) {
      outcome = { ok: false, failure: admission.failure };
    } else {
      const catalog = admission.catalog;
      const normalized = await timedStage(stages, "normalize", () => normalizeToolCall(tool, rawArgs, { isAdmitted: (n) => catalog.admitted.has(n) }));
      if (!normalized.ok) {
        outcome = { ok: false, failure: normalized.failure };
      } else {
        def = toolDefinition(normalized.tool) as ToolDefinition;
        normalization = normalized.normalization;
        args = normalized.arguments;
        const ctx: CallContext = { caller, catalog, signal, stages, projectCanonicalId: "", sessionId: "", literal: normalized.literal };
        outcome = await executeSafely(def, args, ctx, callId);
        // The Runner could not serve the rewrite, so the literal call ran: it is what is
        // audited, projected and reported, with no rewrite code.
        if (ctx.ranLiteral && normalized.literal) {
          def = ctx.ranLiteral;
          normalization = normalized.literal.normalization;
          args = normalized.literal.arguments;
        }
        // Canonical from here on: audit and Session evidence read it, projections copy it.
        if (outcome.ok) Object.freeze(outcome.result);
        projectCanonicalId = ctx.projectCanonicalId;
        sessionId = ctx.sessionId;
        jobAttention = ctx.attention;
      }
    }

    // Every failure with a known repair carries it (the reason-code table says which).
    if (!outcome.ok) outcome = { ok: false, failure: withRecovery(outcome.failure, projectSelector(args, rawArgs)) };

    // Audit capture, from the canonical outcome before the late model projection: nothing a
    // projection adds (input_normalization, follow_up) can reach the record or its sizes.
    const canonicalBytes = outcome.ok ? measureCanonical(outcome.result) : undefined;
    const failure = outcome.ok ? undefined : outcome.failure;
    const effectful = def !== undefined && def.effect !== "read_only";
    const stateChanged = failure ? failure.state_changed : effectful && outcome.ok && outcome.result["changed"] !== false;
    const outcomeUnknown = failure?.outcome_unknown ?? false;
    const durable = effectful && (outcome.ok || stateChanged || outcomeUnknown);
    const toolName = def?.name ?? "unknown_tool";
    const captured = {
      callId,
      clientId: caller.principal.clientId,
      subject: caller.principal.subject,
      tool: toolName,
      projectCanonicalId,
      sessionId,
      effect: def?.effect ?? "read_only",
      outcome: outcome.ok ? "success" : "failure",
      reasonCode: failure?.reason_code ?? "",
      failureStage: failure?.failure_stage ?? "",
      stateChanged,
      outcomeUnknown,
      // model_ergonomics: only canonical success reports a normalization code.
      inputNormalizationCode: outcome.ok ? (normalization?.code ?? "") : "",
      startedAtUnixMs: BigInt(started),
      ...(shape ? { argumentShape: shape } : {}),
    } satisfies Omit<ActionRecordInit, "durationUs" | "stageDurationsUs">;

    // The late, pure projection: a new object; the canonical result stays as captured.
    const projected = await timedStage(stages, "project", () => project(def, outcome, normalization, args));
    const resultSize = outcome.ok ? measureProjection(canonicalBytes, projected.structuredContent, args) : undefined;
    const validation = outcome.ok ? validationVerdict(outcome.result) : undefined;
    const record: ActionRecordInit = {
      ...captured,
      ...(validation ? { validation } : {}),
      durationUs: micros(t0),
      // A copy: the record stage's own time is not part of the record (batched records are serialized later).
      stageDurationsUs: { ...stages },
      ...(resultSize ? { resultSize } : {}),
    };

    let result = projected;
    try {
      await timedStage(stages, "record", () => deps.audit.record(record, durable));
    } catch (error) {
      if (!durable) {
        deps.logger.warn("audit record not queued", { tool: toolName, error });
      } else {
        deps.logger.error("effectful call not acknowledged: its audit record is not durable", { tool: toolName, error });
        result = { structuredContent: auditNotDurableFailure(outcome, stateChanged, outcomeUnknown) as unknown as Record<string, unknown>, isError: true };
      }
    }

    // Passive job attention rides on a successful result only, and counts as seen once delivered.
    if (!result.isError && jobAttention) {
      const { key, items } = jobAttention;
      result = { ...result, structuredContent: { ...result.structuredContent, job_attention: { items } }, delivered: () => attention.seen(key, items.map((i) => i.job_id)) };
    }

    const reasonCode = result.isError ? String(result.structuredContent["reason_code"] ?? "") : "";
    span?.setAttribute("webcodex.tool", toolName);
    if (reasonCode) span?.setAttribute("webcodex.reason_code", reasonCode);
    callMetrics?.observeCall({ tool: toolName, outcome: result.isError ? "failure" : "success", reasonCode, durationSeconds: (now() - t0) / 1000, stagesUs: stages });
    return result;
  }

  return { call };
}

export type Pipeline = ReturnType<typeof createPipeline>;
