/**
 * Runner wire capabilities: one declaration table. Each row owns, as columns, the typed id,
 * the wire name, its default (false for every row: a Runner advertises a capability only
 * because its binary implements it) and whether it belongs to the frozen V2 baseline every
 * generation-2 Runner has. Row order is the wire serialization order. Catalog or baseline
 * membership is never permission to advertise support.
 */
import { ReasonCode, toolFailure } from "./failure.js";
import { PipelineStage } from "./pipeline.js";
import type { ToolFailure } from "./failure.js";

export const RUNNER_PROTOCOL_GENERATION = 2;

const rows = [
  { id: "readFiles", wire: "read_files_v1", default: false, baselineV2: true },
  { id: "searchTexts", wire: "search_texts_v1", default: false, baselineV2: true },
  { id: "applyTextEdit", wire: "apply_text_edit_v1", default: false, baselineV2: true },
  /** search_project_texts output files/count and context_lines; search_file_context. */
  { id: "searchLowContext", wire: "search_low_context_v1", default: false, baselineV2: false },
  { id: "applyTextEditExpectedMatchCount", wire: "apply_text_edit_expected_match_count", default: false, baselineV2: false },
  { id: "gitReview", wire: "git_review_v1", default: false, baselineV2: false },
  { id: "processExecution", wire: "process_execution_v1", default: false, baselineV2: false },
  { id: "shellExecution", wire: "shell_execution_v1", default: false, baselineV2: false },
  { id: "bashLogin", wire: "bash_login_v1", default: false, baselineV2: false },
  { id: "pythonScript", wire: "python_script_v1", default: false, baselineV2: false },
  { id: "detachedJobs", wire: "detached_jobs_v1", default: false, baselineV2: false },
  { id: "hostFileImport", wire: "host_file_import_v1", default: false, baselineV2: false },
  /** Validation providers: advertised only when a runtime probe finds the toolchain. */
  { id: "validationNode", wire: "validation_node_v1", default: false, baselineV2: false },
  { id: "validationPython", wire: "validation_python_v1", default: false, baselineV2: false },
  { id: "validationGo", wire: "validation_go_v1", default: false, baselineV2: false },
  { id: "validationRust", wire: "validation_rust_v1", default: false, baselineV2: false },
  /** Mutating calls carry the Project lease fence; a fence below the highest seen is refused. */
  { id: "fencedExecution", wire: "fenced_execution_v1", default: false, baselineV2: false },
  /** Calls made for an Agent Attempt carry its (task, fence); a fence below the Task's durable mark is refused. */
  { id: "attemptFencing", wire: "attempt_fencing_v1", default: false, baselineV2: false },
  /** list_skills/read_skill: the Runner reads the project's Agent Skills (.agents/skills, .claude/skills). */
  { id: "projectSkills", wire: "project_skills_v1", default: false, baselineV2: false },
] as const satisfies ReadonlyArray<{ id: string; wire: string; default: false; baselineV2: boolean }>;

export type RunnerCapabilityId = (typeof rows)[number]["id"];
export type RunnerCapabilityWire = (typeof rows)[number]["wire"];

export interface RunnerCapabilityRow {
  readonly id: RunnerCapabilityId;
  readonly wire: RunnerCapabilityWire;
  /** Value when a Runner does not advertise it: always false (absent means unsupported). */
  readonly default: false;
  /** Part of the frozen generation-2 baseline; its absence is a protocol fault. */
  readonly baselineV2: boolean;
}

/** The declaration table, in wire order. */
export const runnerCapabilityCatalog: readonly RunnerCapabilityRow[] = rows;

const byWire = new Map<string, RunnerCapabilityRow>(rows.map((r) => [r.wire, r]));
const byId = new Map<string, RunnerCapabilityRow>(rows.map((r) => [r.id, r]));

export function runnerCapabilityWire(id: RunnerCapabilityId): RunnerCapabilityWire {
  return (byId.get(id) as RunnerCapabilityRow).wire;
}

/** The row with this wire name, or undefined for a name the catalog does not declare. */
export function runnerCapabilityByWire(wire: string): RunnerCapabilityRow | undefined {
  return byWire.get(wire);
}

/** A typed set of what one Runner advertised. Unknown wire names are ignored (newer Runner). */
export class RunnerCapabilities {
  private readonly set: ReadonlySet<RunnerCapabilityId>;
  constructor(ids: Iterable<RunnerCapabilityId>) {
    this.set = new Set(ids);
  }
  static fromWire(names: readonly string[]): RunnerCapabilities {
    const ids: RunnerCapabilityId[] = [];
    for (const n of names) {
      const row = byWire.get(n);
      if (row) ids.push(row.id);
    }
    return new RunnerCapabilities(ids);
  }
  has(id: RunnerCapabilityId): boolean {
    return this.set.has(id);
  }
  /** Wire names in declaration order (the serialization order). */
  toWire(): RunnerCapabilityWire[] {
    return rows.filter((r) => this.set.has(r.id)).map((r) => r.wire);
  }
  /** Baseline rows a generation-2 Runner failed to advertise (a protocol fault, not a feature gap). */
  missingBaseline(): RunnerCapabilityId[] {
    return rows.filter((r) => r.baselineV2 && !this.set.has(r.id)).map((r) => r.id);
  }
}

/** Capabilities a call of `def` (a ToolDefinition) with `args` needs that `have` does not offer. */
export function missingCapabilities(
  def: { readonly requiredCapabilities?: (args: Record<string, unknown>) => readonly RunnerCapabilityId[] } | undefined,
  args: Record<string, unknown>,
  have: RunnerCapabilities,
): RunnerCapabilityId[] {
  return (def?.requiredCapabilities?.(args) ?? []).filter((id) => !have.has(id));
}

/** The dispatch refusal for a call whose Runner lacks `missing` (non-empty): nothing was run. */
export function capabilityMissingFailure(missing: readonly RunnerCapabilityId[], runnerBuild: string, message: string): ToolFailure {
  return toolFailure(ReasonCode.capabilityMissing, PipelineStage.dispatch, {
    detail_code: runnerCapabilityWire(missing[0] as RunnerCapabilityId),
    evidence: { missing_capabilities: missing.map(runnerCapabilityWire), runner_build: runnerBuild },
    message,
  });
}
