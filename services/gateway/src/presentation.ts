/**
 * Presentation and continuation tools (present_*) and the app-only helpers a mounted card
 * calls. Results are sparse facts: a card renders the tool's input (title, summary, goal and
 * steps) with the result's facts, and a Host without a renderer reads the same facts in the
 * structured content and the text.
 */
import { randomUUID } from "node:crypto";
import type { Client } from "@connectrpc/connect";
import type { ContinuationFact, RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import {
  PipelineStage,
  ReasonCode,
  isTerminalJobState,
  toolFailure,
  waitForAgentEventsFollowUp,
  waitForJobFollowUp,
  failureFromWire,
} from "@webcodex/contracts";
import type { ModelWorkflowPolicy, PresentationToolName, ToolDefinition, ToolInput, Result } from "@webcodex/contracts";
import type { ContinuationFactInit, Outcome } from "./call-context.js";
import { validationView } from "./session-facts.js";
import type { RouteTable } from "./execute/routes.js";

export type { ContinuationFactInit } from "./call-context.js";

type CallOptions = { signal: AbortSignal; headers: Record<string, string> };
type Json = Record<string, unknown>;
/** One continuation fact for the call's audit row. */
/** Receives the continuation facts a presentation call established. */
export type RecordFacts = (facts: ContinuationFactInit[]) => void;

export interface PresentationDeps {
  refResolver: Client<typeof RefResolverService>;
  broker: Client<typeof RunnerBrokerService>;
  policy: ModelWorkflowPolicy;
  /** Direct routes: a Project's is dropped once a continuation was recorded, so the broker sees its next call. */
  routes?: RouteTable | undefined;
}

/** The authorized Project of a call (the pipeline resolves it and records it for audit). */
export type ResolveProject = (selector: string) => Promise<Result<{ canonicalId: string; rootIdentity: string }>>;

/** Changed files listed on a work result card; the total says how many there were. */
const MAX_CARD_FILES = 50;

/** The facts of a Job continuation: live state, then the three separate observations. */
function continuationView(
  project: string,
  jobId: string,
  res: { jobJson: string; continuation?: { dispatch: string; dispatchAtUnixMs: bigint; freshTurnAtUnixMs: bigint; consumedAtUnixMs: bigint } | undefined },
  policy: ModelWorkflowPolicy,
): Json {
  const job = (res.jobJson ? JSON.parse(res.jobJson) : {}) as Json;
  const state = typeof job["state"] === "string" ? job["state"] : "unknown";
  const c = res.continuation;
  const view: Json = {
    job_id: jobId,
    project,
    state,
    terminal: isTerminalJobState(state),
    continuation: {
      dispatch: c?.dispatch ?? "none",
      fresh_turn: c && c.freshTurnAtUnixMs > 0n ? "observed" : "not_observed",
      consumed: c !== undefined && c.consumedAtUnixMs > 0n,
      unattended_continuation: policy.hostInteraction.unattendedContinuation,
      follow_up: waitForJobFollowUp(project, jobId),
    },
  };
  if (typeof job["exit_code"] === "number") view["exit_code"] = job["exit_code"];
  if (job["outcome_unknown"] === true) view["outcome_unknown"] = true;
  return view;
}

/**
 * A handler for every presentation tool of the catalog (cards and their app-only helpers), keyed
 * by its name and taking that tool's arguments typed from its input schema: a presentation tool
 * without a handler does not compile.
 */
export type PresentationHandlers = {
  [N in PresentationToolName]: (def: ToolDefinition, args: ToolInput<N>, resolve: ResolveProject, options: CallOptions, facts: RecordFacts) => Promise<Outcome>;
};

/** A handler called with a normalized call's arguments (validated against the tool's input schema). */
type WireHandler = (def: ToolDefinition, args: Json, resolve: ResolveProject, options: CallOptions, facts: RecordFacts) => Promise<Outcome>;

/** The arguments every Job continuation tool takes: the Job and its Project. */
type JobCard = ToolInput<"present_job_terminal_continuation" | "read_job_continuation" | "update_job_continuation">;

export function createPresentation(deps: PresentationDeps) {
  async function jobContinuation(args: JobCard, action: string, resolve: ResolveProject, options: CallOptions, facts: RecordFacts): Promise<Outcome> {
    const { project, job_id: jobId } = args;
    const p = await resolve(project);
    if (!p.ok) return p;
    const res = await deps.broker.recordJobContinuation({ projectCanonicalId: p.canonicalId, rootIdentity: p.rootIdentity, jobId, action }, options);
    if (action === "accepted") deps.routes?.forget(p.canonicalId);
    if (res.failure) return { ok: false, failure: failureFromWire(res.failure) };
    const view = continuationView(project, jobId, res, deps.policy);
    if (res.applied && ["claim", "accepted", "rejected", "uncertain"].includes(action))
      facts([{ subject: "job", id: jobId, fact: `dispatch_${action === "claim" ? "claimed" : action}` }]);
    if (action === "claim" && !res.applied) {
      // Someone already claimed (or answered) this dispatch: never send a second message.
      return {
        ok: false,
        failure: toolFailure(ReasonCode.invalidValue, PipelineStage.preflight, {
          detail_code: "dispatch_already_claimed",
          evidence: { dispatch: (view["continuation"] as Json)["dispatch"] as string },
          message: "This continuation was already dispatched (or its delivery is uncertain); it is never sent twice.",
        }),
      };
    }
    return { ok: true, result: view };
  }

  /** present_agent_continuation and its card helpers: the record lives with the Agent (ref-resolver). */
  async function agentContinuation(def: ToolDefinition, args: Json, options: CallOptions, facts: RecordFacts): Promise<Outcome> {
    const res = await deps.refResolver.callAgentTool({ tool: def.name, argumentsJson: JSON.stringify(args) }, options);
    if (res.continuationFacts?.length) facts(res.continuationFacts.map((f) => ({ subject: f.subject, id: f.id, fact: f.fact })));
    if (res.failure) return { ok: false, failure: failureFromWire(res.failure) };
    const view = JSON.parse(res.resultJson) as Json;
    const c = view["continuation"] as Json;
    view["continuation"] = {
      ...c,
      unattended_continuation: deps.policy.hostInteraction.unattendedContinuation,
      follow_up: waitForAgentEventsFollowUp({ agent_id: view["agent_id"] as string }, view["after_cursor"] as string),
    };
    return { ok: true, result: view };
  }

  async function workResult(args: ToolInput<"present_work_result">, resolve: ResolveProject, options: CallOptions): Promise<Outcome> {
    const p = await resolve(args.project);
    if (!p.ok) return p;
    const [changes, jobs, validation] = await Promise.all([
      deps.broker.dispatch(
        { callId: randomUUID(), projectCanonicalId: p.canonicalId, rootIdentity: p.rootIdentity, tool: "read_workspace_changes", argumentsJson: "{}" },
        options,
      ),
      deps.broker.listProjectJobs({ projectCanonicalId: p.canonicalId }, options),
      deps.refResolver.latestProjectValidation({ projectCanonicalId: p.canonicalId, sessionSelector: args.session_id ?? "" }, options),
    ]);
    // A session_id that is not the caller's Session on this Project fails the call like any other selector.
    if (validation.failure) return { ok: false, failure: failureFromWire(validation.failure) };
    const result: Json = {};
    if (changes.failure) {
      // No review facts (not a git repository, Runner away): say so; the card still shows the rest.
      result["changes_unavailable"] = failureFromWire(changes.failure).reason_code;
    } else {
      const c = JSON.parse(changes.resultJson) as { changes?: Json[]; total_changes?: number; truncated?: boolean };
      const files = (c.changes ?? [])
        .slice(0, MAX_CARD_FILES)
        .map((f) => ({ path: f["path"], status: f["status"], added_lines: f["added_lines"], removed_lines: f["removed_lines"] }));
      result["changed_files"] = files;
      if ((c.total_changes ?? files.length) > files.length) result["total_changed_files"] = c.total_changes;
    }
    // The latest validation result recorded in the caller's Sessions on this Project (or the given one).
    if (validation.latest) {
      const { seq: _seq, ...latest } = validationView(validation.latest);
      result["latest_validation"] = { ...latest, session_id: validation.sessionId };
    }
    result["pending_jobs"] = jobs.jobs.map((j) => ({ job_id: j.jobId, state: j.state }));
    if (jobs.truncated) result["pending_jobs_truncated"] = true;
    return { ok: true, result };
  }

  async function goalPlan(args: ToolInput<"present_goal_plan">, resolve: ResolveProject, options: CallOptions): Promise<Outcome> {
    let projectCanonicalId = "";
    if (args.project !== undefined) {
      const p = await resolve(args.project);
      if (!p.ok) return p;
      projectCanonicalId = p.canonicalId;
    }
    const res = await deps.refResolver.putGoalPlan({ projectCanonicalId, goal: args.goal, stepsJson: JSON.stringify(args.steps) }, options);
    const counts: Record<string, number> = {};
    for (const s of args.steps) counts[s.state] = (counts[s.state] ?? 0) + 1;
    return { ok: true, result: { plan_id: res.planId, revision: Number(res.revision), step_counts: counts } };
  }

  const handlers: PresentationHandlers = {
    present_job_terminal_continuation: (_def, args, resolve, options, facts) => jobContinuation(args, "present", resolve, options, facts),
    read_job_continuation: (_def, args, resolve, options, facts) => jobContinuation(args, "read", resolve, options, facts),
    update_job_continuation: (_def, args, resolve, options, facts) => jobContinuation(args, args.step, resolve, options, facts),
    present_agent_continuation: (def, args, _resolve, options, facts) => agentContinuation(def, args, options, facts),
    read_agent_continuation: (def, args, _resolve, options, facts) => agentContinuation(def, args, options, facts),
    update_agent_continuation: (def, args, _resolve, options, facts) => agentContinuation(def, args, options, facts),
    present_work_result: (_def, args, resolve, options) => workResult(args, resolve, options),
    present_goal_plan: (_def, args, resolve, options) => goalPlan(args, resolve, options),
  };

  return {
    /**
     * Runs a presentation tool or card helper with the call's normalized arguments (the one place
     * they are taken as the tool's ToolInput); undefined for any other tool.
     */
    run(def: ToolDefinition, args: Json, resolve: ResolveProject, options: CallOptions, facts: RecordFacts): Promise<Outcome> | undefined {
      const handler = Object.hasOwn(handlers, def.name) ? (handlers[def.name as PresentationToolName] as WireHandler) : undefined;
      return handler?.(def, args, resolve, options, facts);
    },
  };
}

/** "failed (project_validate): tests 1 passed, 1 failed, 0 skipped; 1 error, 0 warnings". */
export function validationLine(v: Json): string {
  const t = v["tests"] as Json | undefined;
  const d = v["diagnostics"] as Json | undefined;
  const parts = [
    t ? `tests ${String(t["passed"])} passed, ${String(t["failed"])} failed, ${String(t["skipped"])} skipped` : "",
    d ? `${String(d["errors"])} errors, ${String(d["warnings"])} warnings` : "",
  ].filter(Boolean);
  return `${String(v["status"])} (${String(v["tool"])})${parts.length > 0 ? `: ${parts.join("; ")}` : ""}`;
}

/** The compact text a Host without a renderer shows for a presentation result, by tool (its arguments typed from its input schema). */
const texts: { [N in PresentationToolName]?: (args: ToolInput<N>, result: Json) => string } = {
  present_job_terminal_continuation(_args, result) {
    const c = result["continuation"] as Json;
    return (
      `Job ${String(result["job_id"])} is ${String(result["state"])}${typeof result["exit_code"] === "number" ? ` (exit ${String(result["exit_code"])})` : ""}. ` +
      `When it ends, the card asks the Host for a fresh turn carrying ${JSON.stringify({ tool: (c["follow_up"] as Json)["tool"], arguments: (c["follow_up"] as Json)["arguments"] })}. ` +
      "End your turn now; do not wait for the Job in this turn."
    );
  },
  present_agent_continuation(_args, result) {
    const c = result["continuation"] as Json;
    const events = (result["pending_events"] as Json[]).map((e) => `- ${String(e["kind"])}${e["task_id"] ? ` (${String(e["task_id"])})` : ""}`);
    return (
      `Agent ${String(result["agent_id"])}: ${String(result["pending_count"])} pending event(s) after cursor ${String(result["after_cursor"])}${events.length > 0 ? `:\n${events.join("\n")}` : "."}\n` +
      `When events are pending, the card asks the Host for a fresh turn carrying ${JSON.stringify({ tool: (c["follow_up"] as Json)["tool"], arguments: (c["follow_up"] as Json)["arguments"] })}. ` +
      "End your turn now; do not wait for events in this turn."
    );
  },
  present_work_result(args, result) {
    const files = (result["changed_files"] as Json[] | undefined) ?? [];
    const lines = files.map(
      (f) => `- ${String(f["path"])} (${String(f["status"])}, +${String(f["added_lines"] ?? "?")} -${String(f["removed_lines"] ?? "?")})`,
    );
    const jobs = (result["pending_jobs"] as Json[]).map((j) => `${String(j["job_id"])} ${String(j["state"])}`);
    const v = result["latest_validation"] as Json | undefined;
    return [
      args.title,
      args.summary,
      files.length > 0 ? `Changed files:\n${lines.join("\n")}` : "No changed files.",
      v ? `Latest validation: ${validationLine(v)}` : "",
      jobs.length > 0 ? `Pending Jobs: ${jobs.join(", ")}` : "",
    ]
      .filter(Boolean)
      .join("\n");
  },
  present_goal_plan(args, result) {
    const steps = args.steps.map((s, i) => `${i + 1}. [${s.state}] ${s.title}`);
    return `${args.goal} (revision ${String(result["revision"])})\n${steps.join("\n")}`;
  },
};

/** The compact text a Host without a renderer shows for a presentation result (the call's normalized arguments taken as the tool's ToolInput). */
export function presentationText(tool: string, args: Json, result: Json): string | undefined {
  const text = Object.hasOwn(texts, tool) ? (texts[tool as PresentationToolName] as ((args: Json, result: Json) => string) | undefined) : undefined;
  return text?.(args, result);
}
