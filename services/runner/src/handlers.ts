/**
 * The tools this Runner binary implements, bound to one workspace and one executor, and
 * the capabilities it therefore advertises. Each tool names the wire capabilities its
 * implementation provides; the advertised list is exactly their union (in catalog order)
 * plus what the RunnerService provides around every handler, so nothing is advertised from
 * catalog membership alone. The validation rows are advertised once the runtime probe found
 * their toolchains (`probed`). The signal is the call's: when the caller abandons a run_* call
 * before it returns, its process is stopped.
 */
import { runnerCapabilityCatalog } from "@webcodex/contracts";
import type { RunnerArguments, RunnerCapabilityId, RunnerToolName } from "@webcodex/contracts";
import type { RunnerHandlers, ToolHandler } from "./runner-service.js";
import type { Workspace } from "./workspace/index.js";
import type { Executor } from "./exec/index.js";
import { runValidation } from "./validation/tools.js";
import type { ValidationTool } from "./validation/tools.js";
import { projectSkillHandlers } from "./skills/project-skills.js";

interface ImplementedTool<N extends RunnerToolName> {
  /** The capabilities this implementation provides (each a prerequisite of some of its calls). */
  capabilities: readonly RunnerCapabilityId[];
  /** Those it provides only as far as a runtime probe confirms them. */
  probed?: Promise<readonly RunnerCapabilityId[]>;
  run: (args: RunnerArguments<N>, signal: AbortSignal) => Promise<unknown>;
}

/** Every Runner tool of the catalog, each with its implementation: a tool without one does not compile. */
export type Implementations = { [N in RunnerToolName]: ImplementedTool<N> };

/** True when A and B are one type, not only assignable to each other. */
type Same<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;

/**
 * The tools among `T`'s implementations whose run takes other arguments than the tool's own
 * RunnerArguments. Implementations alone compares them by assignability, so it accepts a run
 * written for another tool whose arguments fit (cargo_check's and cargo_test's are all optional,
 * and each is assignable to the other).
 */
type MistypedImplementations<T> = {
  [N in keyof T]: N extends RunnerToolName
    ? T[N] extends { run: (args: infer A, signal: AbortSignal) => unknown }
      ? Same<A, RunnerArguments<N>> extends true
        ? never
        : N
      : N
    : N;
}[keyof T];

/** `true` when every run of `T` takes exactly its tool's RunnerArguments; else the names of those that do not. */
export type ExactlyTyped<T> = [MistypedImplementations<T>] extends [never] ? true : MistypedImplementations<T>;

/** Compiles only when T is `true`. */
type Holds<T extends true> = T;

/** Enforced by the RunnerService every handler runs behind (stale lease and Attempt fences are refused). */
const SERVICE_CAPABILITIES: readonly RunnerCapabilityId[] = ["fencedExecution", "attemptFencing"];

/**
 * The wire handler of a typed implementation: the one place the Runner takes a call's arguments
 * as its RunnerArguments. It trusts the gateway for that: normalizeToolCall validated them against
 * the tool's input schema and canonicalized them (argv folded into args, budgets clamped) and
 * runnerArguments removed the gateway's own fields before dispatch. The implementations still
 * check what they act on (paths and cwd inside the root, budgets clamped to their ceilings).
 */
function wire<N extends RunnerToolName>(tool: ImplementedTool<N>): ToolHandler {
  return (args, signal) => tool.run(args as RunnerArguments<N>, signal);
}

/**
 * `validation` resolves to the validation capability rows a runtime probe found toolchains for;
 * `advertised` is what the Runner finally advertises (the validation process skips providers
 * missing from it).
 */
export function runnerHandlers(
  workspace: Workspace,
  executor: Executor,
  validation: Promise<readonly RunnerCapabilityId[]> = Promise.resolve([]),
  advertised?: () => Promise<readonly RunnerCapabilityId[]>,
  /** The workspace root: the project's Agent Skills are read from it. */
  root?: string,
): RunnerHandlers {
  const validationDeps = { executor, capabilities: () => advertised?.() ?? validation };
  /** A validation tool's run: its arguments are that tool's own. */
  const validate =
    <N extends ValidationTool>(tool: N) =>
    (a: RunnerArguments<N>, signal: AbortSignal) =>
      runValidation(validationDeps, tool, a, signal);
  const implemented = {
    read_files: { capabilities: ["readFiles"], run: (a) => workspace.readFiles(a) },
    list_project_files: { capabilities: ["searchTexts"], run: (a) => workspace.listProjectFiles(a) },
    search_project_texts: { capabilities: ["searchTexts", "searchLowContext"], run: (a) => workspace.searchProjectTexts(a) },
    search_file_context: { capabilities: ["searchLowContext"], run: (a) => workspace.searchFileContext(a) },
    edit_project_files: { capabilities: ["applyTextEdit", "applyTextEditExpectedMatchCount"], run: (a) => workspace.editProjectFiles(a) },
    import_host_files: { capabilities: ["hostFileImport"], run: (a) => workspace.importHostFiles(a) },
    read_workspace_changes: { capabilities: ["gitReview"], run: (a) => workspace.readWorkspaceChanges(a) },
    read_git_diff_hunks: { capabilities: ["gitReview"], run: (a) => workspace.readGitDiffHunks(a) },
    read_git_review_summary: { capabilities: ["gitReview"], run: (a) => workspace.readGitReviewSummary(a) },
    run_process: { capabilities: ["processExecution"], run: (a, signal) => executor.runProcess(a, signal) },
    run_shell: {
      capabilities: ["shellExecution", "bashLogin"],
      // The catalog's run_shell default is sh; the executor's own default is not relied on.
      run: (a, signal) => executor.runShell({ ...a, shell: a.shell ?? "sh" }, signal),
    },
    run_script: { capabilities: ["pythonScript"], run: (a, signal) => executor.runScript(a, signal) },
    run_detached_process: { capabilities: ["detachedJobs"], run: (a) => executor.runDetachedProcess(a) },
    observe_jobs: { capabilities: [], run: async (a) => executor.observeJobs(a) },
    wait_for_job_terminal: { capabilities: [], run: (a, signal) => executor.waitForJobTerminal(a, signal) },
    // The validation tools check their arguments themselves, the last line before a process.
    project_validate: { capabilities: [], probed: validation, run: validate("project_validate") },
    cargo_check: { capabilities: [], run: validate("cargo_check") },
    cargo_test: { capabilities: [], run: validate("cargo_test") },
    go_test: { capabilities: [], run: validate("go_test") },
  } satisfies Implementations;
  // Each run takes its own tool's arguments: one that does not is named in tsc's error here.
  type _EveryRunExactlyTyped = Holds<ExactlyTyped<typeof implemented>>;
  const tools: Record<string, ToolHandler> = {};
  const provided = new Set<RunnerCapabilityId>(SERVICE_CAPABILITIES);
  const probes: Array<Promise<readonly RunnerCapabilityId[]>> = [];
  for (const [name, tool] of Object.entries<ImplementedTool<RunnerToolName>>(implemented)) {
    tools[name] = wire(tool);
    for (const id of tool.capabilities) provided.add(id);
    if (tool.probed) probes.push(tool.probed);
  }
  // Gateway-composed tools whose project part the Runner reads (list_skills, read_skill).
  if (root !== undefined) {
    const skills = projectSkillHandlers(root);
    Object.assign(tools, skills.tools);
    for (const id of skills.capabilities) provided.add(id);
  }
  const inCatalogOrder = (ids: ReadonlySet<RunnerCapabilityId>) => runnerCapabilityCatalog.filter((row) => ids.has(row.id)).map((row) => row.id);
  return {
    tools,
    capabilities: inCatalogOrder(provided),
    probed: Promise.all(probes).then((found) => inCatalogOrder(new Set(found.flat().filter((id) => !provided.has(id))))),
  };
}
