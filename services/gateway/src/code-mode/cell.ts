/**
 * run_code_cell: a read-only composition cell. The cell's Project is resolved for the caller
 * first; its code then runs in the sandbox, and every `tools.<name>(args)` it makes comes back
 * here and goes through the whole pipeline (`call`) as the same principal, with the cell's
 * call_id as its audit parent. Only tools the catalog's effect column marks read-only (and the
 * caller's catalog admits) are callable; any other name fails inside the cell as
 * tool_not_admitted without reaching the pipeline. A cell changes nothing, so its failure is
 * never outcome_unknown.
 */
import type { Client } from "@connectrpc/connect";
import type { RefResolverService } from "@webcodex/proto";
import { CODE_CELL_TOOL, cellToolNames, clampRule, PipelineStage, ReasonCode, toolDefinition, toolFailure, toolLimit } from "@webcodex/contracts";
import type { ToolDefinition, ToolInput } from "@webcodex/contracts";
import type { Caller } from "../auth.js";
import type { CallContext, Outcome } from "../call-context.js";
import { resolveCallProject } from "../execute/call-scope.js";
import { createSandboxPool } from "./sandbox.js";
import type { CellLimits, CellRun, ChildOutcome, SandboxPool } from "./sandbox.js";

/** What the pipeline answers a child call with (its ModelResult, as far as a cell reads it). */
export interface ChildResult {
  structuredContent: Record<string, unknown>;
  isError: boolean;
  delivered?: () => void;
}

/** The pipeline's own entry, for child calls: `parentCallId` lands in their audit rows. */
export type ChildCaller = (caller: Caller, tool: string, args: unknown, signal: AbortSignal, parent: { parentCallId: string }) => Promise<ChildResult>;

export interface CodeCellDeps {
  refResolver: Client<typeof RefResolverService>;
  call: ChildCaller;
  sandbox?: SandboxPool;
}

/** The cell's limits, all from the catalog entry (its clamp and its named limits). */
export function cellLimits(timeoutMs: number | undefined): CellLimits {
  return {
    timeoutMs: timeoutMs ?? clampRule(CODE_CELL_TOOL, "timeout_ms").default,
    memoryBytes: toolLimit(CODE_CELL_TOOL, "memory_bytes"),
    textBytes: toolLimit(CODE_CELL_TOOL, "text_bytes"),
    maxChildCalls: toolLimit(CODE_CELL_TOOL, "max_child_calls"),
    childConcurrency: toolLimit(CODE_CELL_TOOL, "child_concurrency"),
  };
}

function cellFailure(run: CellRun) {
  const detail = run.kind === "threw" ? "cell_threw" : `cell_${run.kind}`;
  const message =
    run.kind === "timeout"
      ? `The cell stopped at its deadline: ${run.message ?? "interrupted"}.`
      : run.kind === "memory"
        ? "The cell ran out of its memory budget."
        : run.kind === "stack"
          ? "The cell overflowed its stack (deep recursion)."
          : `The cell failed: ${run.message ?? "error"}`;
  return toolFailure(ReasonCode.executionFailed, PipelineStage.execution, {
    detail_code: detail,
    message: message.slice(0, 600),
    evidence: {
      ...(run.line !== undefined ? { line: run.line } : {}),
      ...(run.reasonCode !== undefined ? { child_reason_code: run.reasonCode } : {}),
      text: run.text,
      truncated: run.truncated,
      child_calls: run.childCalls,
      elapsed_ms: run.elapsedMs,
    },
  });
}

/**
 * The text content of a cell's success: exactly what the cell passed to `text(...)`, so the
 * model reads the answer once (structuredContent keeps the canonical result). Two lines follow
 * only when they apply: that the text was cut at its bound, and the ended Jobs the cell forwards.
 */
export function cellText(result: Record<string, unknown>): string {
  let out = typeof result["text"] === "string" ? result["text"] : "";
  const line = (s: string) => {
    out += `${out === "" || out.endsWith("\n") ? "" : "\n"}${s}\n`;
  };
  if (result["truncated"] === true) line(`[text truncated at ${toolLimit(CODE_CELL_TOOL, "text_bytes")} bytes]`);
  if (result["job_attention"] !== undefined) line(`job_attention: ${JSON.stringify(result["job_attention"])}`);
  return out;
}

export function createCodeCells(deps: CodeCellDeps) {
  const sandbox = deps.sandbox ?? createSandboxPool();
  const resultBytes = toolLimit(CODE_CELL_TOOL, "child_result_bytes");

  async function run(args: ToolInput<typeof CODE_CELL_TOOL>, ctx: CallContext, callId: string): Promise<Outcome> {
    const { project: selector, session_id: sessionId } = args;
    const scope = await resolveCallProject(deps.refResolver, selector, ctx);
    if (!scope.ok) return scope;

    const callable = new Set(cellToolNames(ctx.catalog.admitted.values()));
    const attention: unknown[] = [];
    const delivered: Array<() => void> = [];

    const callTool = async (name: string, argsJson: string): Promise<ChildOutcome> => {
      const def = callable.has(name) ? toolDefinition(name) : undefined;
      if (!def)
        return {
          ok: false,
          failure: toolFailure(ReasonCode.toolNotAdmitted, PipelineStage.admission, {
            detail_code: "not_cell_callable",
            evidence: { tool: name.slice(0, 80) },
            message: "A cell calls only admitted read-only tools; call any other tool directly.",
          }) as unknown as Record<string, unknown>,
        };
      const childArgs = withCellDefaults(def, JSON.parse(argsJson) as unknown, selector, sessionId);
      const result = await deps.call(ctx.caller, name, childArgs, ctx.signal, { parentCallId: callId });
      if (result.isError) return { ok: false, failure: result.structuredContent };
      const { job_attention: jobAttention, ...rest } = result.structuredContent;
      if (jobAttention && typeof jobAttention === "object") attention.push(...((jobAttention as { items?: unknown[] }).items ?? []));
      if (result.delivered) delivered.push(result.delivered);
      if (Buffer.byteLength(JSON.stringify(rest)) > resultBytes)
        return {
          ok: false,
          failure: toolFailure(ReasonCode.invalidValue, PipelineStage.execution, {
            detail_code: "child_result_too_large",
            message: `The ${name} result is larger than a cell takes (${resultBytes} bytes); narrow the call.`,
          }) as unknown as Record<string, unknown>,
        };
      return { ok: true, result: rest };
    };

    const run = await sandbox.run(args.code, cellLimits(args.timeout_ms), callTool, ctx.signal);
    if (delivered.length > 0) ctx.onDelivered = () => delivered.forEach((d) => d());
    if (run.kind !== "ok") return { ok: false, failure: cellFailure(run) };
    return {
      ok: true,
      result: {
        text: run.text,
        truncated: run.truncated,
        child_calls: run.childCalls,
        elapsed_ms: run.elapsedMs,
        ...(attention.length > 0 ? { job_attention: { items: attention } } : {}),
      },
    };
  }

  return {
    runs: (def: ToolDefinition) => def.name === CODE_CELL_TOOL,
    /** Runs a cell with the call's normalized arguments (the one place they are taken as run_code_cell's ToolInput). */
    run: (args: Record<string, unknown>, ctx: CallContext, callId: string) => run(args as ToolInput<typeof CODE_CELL_TOOL>, ctx, callId),
    close: () => sandbox.close(),
  };
}

/** A child's arguments with the cell's `project` and `session_id` where its schema has them and the cell left them out. */
function withCellDefaults(def: ToolDefinition, args: unknown, project: string, sessionId: string | undefined): unknown {
  if (typeof args !== "object" || args === null || Array.isArray(args)) return args;
  const props = def.inputSchema.properties ?? {};
  const out = { ...(args as Record<string, unknown>) };
  if ("project" in props && out["project"] === undefined) out["project"] = project;
  if (sessionId !== undefined && "session_id" in props && out["session_id"] === undefined) out["session_id"] = sessionId;
  return out;
}
