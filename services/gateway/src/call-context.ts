/**
 * What every layer of one tools/call shares: the outcome type, the call's context, stage
 * timing, and the mapping of a transport error to a failure that says what is known.
 */
import { ConnectError } from "@connectrpc/connect";
import { PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { CanonicalCall, PipelineSubStage, StageTimings, ToolDefinition, ToolFailure, Result } from "@webcodex/contracts";
import { connectCodeName, provenNotSent, withSpan } from "@webcodex/platform";
import type { ContinuationFact } from "@webcodex/proto";
import type { Caller } from "./auth.js";
import type { AdmittedCatalog } from "./catalog-cache.js";
import type { JobAttentionItem } from "./job-attention.js";

/** A continuation fact a presentation call established (recorded with the call's audit row). */
export type ContinuationFactInit = Pick<ContinuationFact, "subject" | "id" | "fact">;

/** A call's canonical outcome: the result the audit captures, or the structured failure. */
export type Outcome = Result<{ result: Record<string, unknown> }>;

/** A resolved Project as the executors address it. */
export interface ProjectAddress {
  canonicalId: string;
  rootIdentity: string;
}

export interface CallContext {
  caller: Caller;
  catalog: AdmittedCatalog;
  signal: AbortSignal;
  stages: StageTimings;
  projectCanonicalId: string;
  /** Canonical wc_sess_* the call is recorded into (or targets), once resolved and authorized; else "". */
  sessionId: string;
  /** The call without its rewrite to another tool, which the broker may run instead (run_process for run_shell). */
  literal?: CanonicalCall | undefined;
  /** Set when the broker answered for `literal` (the Runner lacked a capability the rewrite needs): the tool that ran. */
  ranLiteral?: ToolDefinition | undefined;
  /** Ended Jobs of this caller and project the result may carry, and whose watch list they are on. */
  attention?: { key: string; items: JobAttentionItem[] } | undefined;
  /** Continuation facts (Job or Agent) this call established, for its audit row. */
  continuationFacts?: ContinuationFactInit[] | undefined;
  /** Set when a tool whose effect is its target's (mcp_tool) named a target the operator marks read-only: audited as a read. */
  readOnlyTarget?: boolean | undefined;
  /** The upstream MCP server and tool an mcp_tool call reached, with bytes sent and received (audit row). */
  upstreamCall?: { server: string; tool: string; requestBytes: number; responseBytes: number } | undefined;
  /** Called once the call's result reached the caller's connection (a cell's children's job attention). */
  onDelivered?: (() => void) | undefined;
  /** The call_id of the run_code_cell this call was made in (its audit row and Session record name it). */
  parentCallId?: string | undefined;
}

export const now = () => performance.now();
export const micros = (since: number) => Math.round((now() - since) * 1000);

/** Runs `fn` as one pipeline stage (a child span of the call's span, named by the stage) and stores its duration (µs) in `stages`. */
export async function timedStage<T>(stages: StageTimings, name: PipelineStage, fn: () => T | Promise<T>): Promise<T> {
  const t = now();
  try {
    return await withSpan(name, { "webcodex.stage": name }, async () => fn());
  } finally {
    stages[name] = micros(t);
  }
}

/** Stores the duration (µs) since `since` of one separately timed part of a stage (no span of its own). */
export function subStageDone(stages: StageTimings, key: PipelineSubStage, since: number): void {
  stages[key] = micros(since);
}

/**
 * Maps a transport/dependency error to a failure that says what is known about the effect. An
 * effectful dispatch may say "nothing was run" only when the request provably never left (the
 * connection was refused or never established); any other error, whatever its Connect code,
 * leaves the effect unknown.
 */
export function dependencyFailure(error: unknown, stage: PipelineStage, effectful: boolean): ToolFailure {
  const ce = ConnectError.from(error);
  const unknown = stage === PipelineStage.dispatch && effectful && !provenNotSent(error);
  const failure = toolFailure(ReasonCode.dependencyUnavailable, stage, {
    detail_code: connectCodeName(ce.code),
    outcome_unknown: unknown,
    message: `A platform dependency failed during ${stage}; ${unknown ? "the effect is unknown: inspect before retrying" : "nothing was run"}.`,
  });
  causes.set(failure, ce.message);
  return failure;
}

/** Why each dependency failure happened (the dependency's own error), for the log only: never shown to the caller. */
const causes = new WeakMap<ToolFailure, string>();

/** The cause dependencyFailure recorded for `failure` (the operator's log line names it). */
export function dependencyCause(failure: ToolFailure): string | undefined {
  return causes.get(failure);
}

/** `to`, a copy of `from` with more said, keeping the cause recorded for `from`. */
export function keepingCause(from: ToolFailure, to: ToolFailure): ToolFailure {
  const cause = causes.get(from);
  if (cause !== undefined) causes.set(to, cause);
  return to;
}
