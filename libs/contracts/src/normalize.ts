/**
 * Input normalization before business parsing: strict on semantics and authority, tolerant
 * on ergonomics. Only proven-lossless repairs happen here, each with a stable code; anything
 * else fails closed with a structured rejection and nothing runs.
 */
import { toolDefinition, toolDefinitions } from "./catalog.js";
import { ReasonCode, toolFailure } from "./failure.js";
import { PipelineStage } from "./pipeline.js";
import type { ToolFailure } from "./failure.js";
import type { Result } from "./result.js";
import { validateToolArguments } from "./schema-validator.js";
import type { SchemaViolation } from "./schema-validator.js";
import { readToolManifestFollowUp } from "./follow-up.js";
import type { JsonSchema } from "./json-schema.js";
import type { ClampRule } from "./tool-definition.js";
import type { ToolInput, ToolName } from "./catalog.js";

/** The four wire spellings, in result precedence order (first wins when several apply). */
export const ToolInputNormalizationCode = {
  processBashLoginToRunShell: "process_bash_login_to_run_shell",
  processShellToRunShell: "process_shell_to_run_shell",
  argvToArgs: "argv_to_args",
  clampedToCeiling: "clamped_to_ceiling",
} as const;
export type ToolInputNormalizationCode = (typeof ToolInputNormalizationCode)[keyof typeof ToolInputNormalizationCode];

const precedence: readonly ToolInputNormalizationCode[] = Object.values(ToolInputNormalizationCode);

/** Model hints, one per code: short, and never a replay of the raw payload. */
export const normalizationHints: Readonly<Record<ToolInputNormalizationCode, string>> = {
  process_bash_login_to_run_shell: "Ran as run_shell with shell=bash, login=true; call run_shell directly for shell commands.",
  process_shell_to_run_shell: "Ran as run_shell; call run_shell directly for shell commands.",
  argv_to_args: "argv is accepted as args; the canonical field is args.",
  clamped_to_ceiling: "A budget above its ceiling was clamped; effective values are reported.",
};

/**
 * The tools whose `argv` is an alias of `args`: those whose catalog input schema has both
 * (there `argv` is declared "Alias of args."). Their canonical arguments always have `args`.
 */
export const ARGV_ALIASED: ReadonlySet<string> = new Set(
  toolDefinitions()
    .filter((d) => d.inputSchema.properties?.["args"] !== undefined && d.inputSchema.properties["argv"] !== undefined)
    .map((d) => d.name),
);
/** The names of ARGV_ALIASED, as a type: the tools whose input type has both `args` and `argv`. */
export type ArgvAliased = { [N in ToolName]: "argv" extends keyof ToolInput<N> ? ("args" extends keyof ToolInput<N> ? N : never) : never }[ToolName];
const isArgvAliased = (tool: string): boolean => ARGV_ALIASED.has(tool);

/** A tool's arguments as normalizeToolCall passes them on: its schema's type, `argv` folded into a required `args`. */
export type CanonicalToolInput<N extends ToolName> = N extends ArgvAliased ? Omit<ToolInput<N>, "argv" | "args"> & { args: string[] } : ToolInput<N>;

export function isToolInputNormalizationCode(value: unknown): value is ToolInputNormalizationCode {
  return typeof value === "string" && (precedence as readonly string[]).includes(value);
}

export interface InputNormalization {
  code: ToolInputNormalizationCode;
  hint: string;
  /** Effective values of clamped fields (dotted path → value). */
  effective?: Record<string, number>;
}

/** One canonical call: the tool, its canonical arguments, and the one reported normalization. */
export interface CanonicalCall {
  tool: string;
  arguments: Record<string, unknown>;
  normalization?: InputNormalization;
}

export type NormalizeResult = Result<
  {
    /**
     * Present only when the call was rewritten to another tool (run_process → run_shell): the
     * same call canonicalized without that rewrite. The rewrite holds only where the canonical
     * path passes the same gates; where the Runner lacks the capability it needs (shell,
     * Bash login), this literal call runs instead and reports no rewrite code.
     */
    literal?: CanonicalCall;
  } & CanonicalCall
>;

export interface NormalizeContext {
  /** Whether a canonical tool is admitted for this caller (rewrites must stay admitted). */
  isAdmitted(tool: string): boolean;
  /** Whether the operator's tool policy withholds the tool from this caller: it is then an unknown name. */
  isWithheld?(tool: string): boolean;
}

const reject = (
  reason: ToolFailure["reason_code"],
  detail: string,
  evidence?: Record<string, unknown>,
  stage: PipelineStage = PipelineStage.normalization,
): NormalizeResult => ({
  ok: false,
  failure: toolFailure(reason, stage, { detail_code: detail, ...(evidence ? { evidence } : {}) }),
});

/** Accepted field names listed in an unknown_field or missing_field failure, at most. */
export const MAX_ACCEPTED_FIELDS = 32;

/**
 * An unknown or missing argument: the field, the names accepted where it is (bounded) and the
 * tool's manifest as the follow-up, so the next call can be right without guessing.
 */
function fieldFailure(tool: string, violation: SchemaViolation): NormalizeResult {
  const evidence: Record<string, unknown> = { field: violation.field };
  if (violation.accepted) {
    evidence["accepted_fields"] = violation.accepted.fields.slice(0, MAX_ACCEPTED_FIELDS);
    if (violation.accepted.fields.length > MAX_ACCEPTED_FIELDS) evidence["accepted_fields_truncated"] = true;
    if (violation.reason_code === ReasonCode.missingField) evidence["required_fields"] = violation.accepted.required.slice(0, MAX_ACCEPTED_FIELDS);
  }
  const failure = toolFailure(violation.reason_code, PipelineStage.normalization, {
    detail_code: violation.detail_code,
    evidence,
    follow_up: readToolManifestFollowUp(tool),
  });
  return { ok: false, failure };
}

/**
 * Canonicalizes one call. Never fuzzy-corrects unknown fields or tool names and never
 * guesses authority, target, effect, retry, fence or idempotency fields.
 */
export function normalizeToolCall(tool: string, rawArguments: unknown, context: NormalizeContext): NormalizeResult {
  const def = toolDefinition(tool);
  // Which tools exist and are admitted is decided at admission (docs/results.md); a tool the
  // operator's policy withholds from this caller is answered exactly as one that does not exist.
  if (!def || context.isWithheld?.(tool) === true) return reject(ReasonCode.unknownTool, "unknown_tool", { tool }, PipelineStage.admission);
  if (!context.isAdmitted(tool)) return reject(ReasonCode.toolNotAdmitted, "not_admitted", { tool }, PipelineStage.admission);
  if (rawArguments === undefined) rawArguments = {};
  if (typeof rawArguments !== "object" || rawArguments === null || Array.isArray(rawArguments)) return reject(ReasonCode.invalidValue, "arguments_not_object");

  const codes = new Set<ToolInputNormalizationCode>();
  let args = dropOptionalNulls(def.inputSchema, rawArguments) as Record<string, unknown>;

  // argv → args (run_process, run_detached_process): alias-only canonicalizes, identical
  // values canonicalize, different values fail closed.
  if ("argv" in args && isArgvAliased(tool)) {
    const { argv, ...rest } = args;
    if ("args" in rest && JSON.stringify(rest["args"]) !== JSON.stringify(argv))
      return reject(ReasonCode.conflictingAlias, "argv_args_differ", { field: "/argv" });
    args = { ...rest, args: argv };
    codes.add(ToolInputNormalizationCode.argvToArgs);
  }

  const violation = validateToolArguments(tool, args);
  if (violation) {
    if (violation.reason_code === ReasonCode.unknownField || violation.reason_code === ReasonCode.missingField) return fieldFailure(tool, violation);
    return reject(violation.reason_code, violation.detail_code, { field: violation.field });
  }
  const crossField = checkCrossField(tool, args);
  if (crossField) return crossField;

  const effective = applyClamps(def.clamps ?? [], args);
  if (effective) codes.add(ToolInputNormalizationCode.clampedToCeiling);

  const literal = canonicalCall(tool, args, codes, effective);
  if (tool === "run_process") {
    const shell = shellCanonicalForm(args);
    if (shell && context.isAdmitted("run_shell")) {
      return { ok: true, ...canonicalCall("run_shell", shell.arguments, new Set([...codes, shell.code]), effective), literal };
    }
  }
  return { ok: true, ...literal };
}

/** A canonical call reporting the one code of `codes` that wins by precedence, with any clamped values. */
function canonicalCall(
  tool: string,
  args: Record<string, unknown>,
  codes: ReadonlySet<ToolInputNormalizationCode>,
  effective: Record<string, number> | undefined,
): CanonicalCall {
  const code = precedence.find((c) => codes.has(c));
  return { tool, arguments: args, ...(code ? { normalization: { code, hint: normalizationHints[code], ...(effective ? { effective } : {}) } } : {}) };
}

/**
 * `null` on an optional declared field means the same as omitting it, at any depth (object
 * properties, array items, the selected branch of a discriminated union): a harmless default
 * spelling (OpenAI strict function schemas send null for every optional field), canonicalized
 * before validation and reported with no code (docs/decisions/0005). A null on a required
 * field, an undeclared field or a map value is kept, so validation rejects it. Copy on write:
 * `value` is never modified.
 */
function dropOptionalNulls(schema: JsonSchema, value: unknown): unknown {
  if (Array.isArray(value)) {
    if (!schema.items) return value;
    const items = schema.items;
    let out: unknown[] | undefined;
    value.forEach((item, i) => {
      const next = dropOptionalNulls(items, item);
      if (next !== item) (out ??= [...value])[i] = next;
    });
    return out ?? value;
  }
  if (typeof value !== "object" || value === null) return value;
  const record = value as Record<string, unknown>;
  const branch =
    schema.oneOf && schema.discriminator
      ? schema.oneOf.find((b) => b.properties?.[schema.discriminator!.propertyName]?.const === record[schema.discriminator!.propertyName])
      : undefined;
  const target = branch ?? schema;
  const properties = target.properties;
  if (!properties) return value;
  const required = new Set(target.required ?? []);
  let out: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(record)) {
    const child = properties[k];
    if (child === undefined) continue;
    if (v === null) {
      if (!required.has(k)) delete (out ??= { ...record })[k];
      continue;
    }
    const next = dropOptionalNulls(child, v);
    if (next !== v) (out ??= { ...record })[k] = next;
  }
  return out ?? value;
}

function checkCrossField(tool: string, args: Record<string, unknown>): NormalizeResult | undefined {
  if (tool === "edit_project_files") {
    const changes = args["changes"] as Array<Record<string, unknown>>;
    for (const [ci, change] of changes.entries()) {
      const edits = (change["edits"] as Array<Record<string, unknown>> | undefined) ?? [];
      for (const [ei, edit] of edits.entries()) {
        if (edit["occurrence"] !== undefined && edit["expected_match_count"] !== undefined)
          return reject(ReasonCode.invalidValue, "occurrence_with_expected_match_count", { field: `/changes/${ci}/edits/${ei}/occurrence` });
        const scope = edit["line_scope"] as { start_line: number; end_line: number } | undefined;
        if (scope && scope.end_line < scope.start_line)
          return reject(ReasonCode.invalidValue, "line_scope_reversed", { field: `/changes/${ci}/edits/${ei}/line_scope` });
      }
    }
  }
  if (tool === "read_files") {
    for (const [i, f] of (args["files"] as Array<Record<string, number | undefined>>).entries()) {
      if (f["start_line"] !== undefined && f["end_line"] !== undefined && f["end_line"] < f["start_line"])
        return reject(ReasonCode.invalidValue, "range_reversed", { field: `/files/${i}/end_line` });
    }
  }
  if (tool === "run_shell" && args["login"] === true && args["shell"] !== "bash")
    return reject(ReasonCode.invalidValue, "login_requires_bash", { field: "/login" });
  if (tool === "import_host_files") {
    for (const [i, f] of (args["files"] as Array<Record<string, unknown>>).entries()) {
      if ("content" in f === "content_base64" in f) return reject(ReasonCode.invalidValue, "content_xor_content_base64", { field: `/files/${i}` });
    }
  }
  return undefined;
}

/** Clamps every over-ceiling knob in place; returns the effective values it changed. */
function applyClamps(rules: readonly ClampRule[], args: Record<string, unknown>): Record<string, number> | undefined {
  let effective: Record<string, number> | undefined;
  for (const rule of rules) {
    visit(args, rule.path.split("."), "", (holder, key, at) => {
      const value = holder[key];
      if (typeof value === "number" && value > rule.ceiling) {
        holder[key] = rule.ceiling;
        (effective ??= {})[at] = rule.ceiling;
      }
    });
  }
  return effective;
}

function visit(node: unknown, parts: string[], at: string, fn: (holder: Record<string, unknown>, key: string, at: string) => void): void {
  const [head, ...rest] = parts;
  if (head === undefined || node === null || typeof node !== "object") return;
  if (head === "*") {
    if (Array.isArray(node)) node.forEach((child, i) => visit(child, rest, `${at}.${i}`, fn));
    return;
  }
  const holder = node as Record<string, unknown>;
  const path = at ? `${at}.${head}` : head;
  if (rest.length === 0) {
    if (head in holder) fn(holder, head, path);
  } else visit(holder[head], rest, path, fn);
}

/**
 * run_process with exactly ["sh"|"bash", "-c", CMD] or ["bash", "-lc", CMD] is run_shell,
 * but only when the rewrite is lossless (no stdin, which run_shell has no field for).
 */
function shellCanonicalForm(args: Record<string, unknown>): { arguments: Record<string, unknown>; code: ToolInputNormalizationCode } | undefined {
  const argv = args["args"] as string[];
  if (argv.length !== 3 || "stdin" in args) return undefined;
  const [exe, flag, command] = argv as [string, string, string];
  if (command.length === 0) return undefined;
  const { args: _argv, ...rest } = args;
  if ((exe === "sh" || exe === "bash") && flag === "-c")
    return { arguments: { ...rest, command, shell: exe }, code: ToolInputNormalizationCode.processShellToRunShell };
  if (exe === "bash" && flag === "-lc")
    return { arguments: { ...rest, command, shell: "bash", login: true }, code: ToolInputNormalizationCode.processBashLoginToRunShell };
  return undefined;
}
