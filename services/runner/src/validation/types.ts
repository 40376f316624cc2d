/**
 * The StructuredValidation output family: what a validator's output says, parsed, bounded and
 * ordered (errors before warnings, first failure first).
 */
import type { ToolInput } from "@webcodex/contracts";

/** A check project_validate can run: its `checks` enum in the catalog. */
export type CheckKind = NonNullable<ToolInput<"project_validate">["checks"]>[number];
/**
 * Every CheckKind with its place in the run order (project_validate runs a plan's steps sorted
 * by it), listed in that order; a kind added to the catalog's enum does not compile until it is
 * listed here.
 */
export const CHECK_ORDER = { typecheck: 0, lint: 1, test: 2, build: 3 } satisfies Record<CheckKind, number>;
/** Every CheckKind, in run order. */
export const CHECK_KINDS = Object.keys(CHECK_ORDER) as readonly CheckKind[];

export function isCheckKind(value: unknown): value is CheckKind {
  return CHECK_KINDS.some((kind) => kind === value);
}

export type ValidationStatus = "passed" | "failed" | "error" | "unparsed";

export type ProviderName = "node" | "python" | "go" | "rust";

export interface ValidationFailure {
  check: CheckKind;
  /** The package (project-relative directory) whose check reported it, when the run covers more than the root package. */
  package?: string;
  path?: string;
  line?: number;
  column?: number;
  test?: string;
  code?: string;
  /** Only "warning" is spelled out; a failure without severity is an error. */
  severity?: "warning";
  message: string;
}

export interface TestCounts {
  passed: number;
  failed: number;
  skipped: number;
}

export interface DiagnosticCounts {
  errors: number;
  warnings: number;
}

/** What one parser made of one validator run. */
export interface ParsedRun {
  status: ValidationStatus;
  tests?: TestCounts;
  diagnostics?: DiagnosticCounts;
  failures: ValidationFailure[];
  /** The output was read in a format other than a machine-readable one (e.g. libtest's human format). */
  format?: string;
  /** Why the status is not a clean verdict (killed, timed_out, output_truncated, ...). */
  detail?: string;
}

/** One finished validator run, as a parser sees it. */
export interface RunOutput {
  stdout: string;
  stderr: string;
  /** Contents of a report file the validator wrote (JUnit XML, JSON reporter), if any. */
  report?: string;
  exitCode: number | null;
  signal: string | null;
  /** stdout or stderr was cut at the capture bound. */
  truncated: boolean;
  /** Absolute project root, for making paths project-relative. */
  root: string;
  /** Absolute directory the validator ran in. */
  cwd: string;
}

export type Parser = (out: RunOutput) => ParsedRun;

export interface CheckResult {
  check: CheckKind;
  /** The package directory (project-relative) the check ran in, when the run covers more than the root package. */
  package?: string;
  provider: ProviderName;
  command_summary: string;
  status: ValidationStatus;
  tests?: TestCounts;
  diagnostics?: DiagnosticCounts;
  format?: string;
  detail?: string;
  duration_ms: number;
  /** Bounded raw output tail, only when the output could not be parsed. */
  raw_tail?: string;
}

/** A check not run, or (with only `package` and `reason`) a whole package left out of this call. */
export interface SkippedCheck {
  package?: string;
  check?: CheckKind;
  provider?: ProviderName;
  reason: string;
  capability?: string;
  found?: string[];
}

export interface StructuredValidation {
  status: ValidationStatus;
  /** Why the status is not a verdict of validators that ran (nothing_detected). */
  detail?: string;
  checks: CheckResult[];
  failures: ValidationFailure[];
  truncated: boolean;
  skipped?: SkippedCheck[];
  detected?: string[];
  notes?: string[];
}
