/**
 * The tools this Runner binary implements, bound to one workspace and one executor, and
 * the capabilities it therefore advertises. Each tool names the wire capabilities its
 * implementation provides; the advertised list is exactly their union (in catalog order)
 * plus what the RunnerService provides around every handler, so nothing is advertised from
 * catalog membership alone. The signal is the call's: when the caller abandons a run_* call
 * before it returns, its process is stopped.
 */
import { runnerCapabilityCatalog } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import type { RunnerHandlers, ToolHandler } from "./runner-service.js";
import type { Workspace } from "./workspace/index.js";
import type { Executor } from "./exec/index.js";
import { runValidation } from "./validation/tools.js";

type Args = Record<string, unknown>;

interface ImplementedTool {
  /** The capabilities this implementation provides (each a prerequisite of some of its calls). */
  capabilities: readonly RunnerCapabilityId[];
  run: ToolHandler;
}

/** Enforced by the RunnerService every handler runs behind (stale lease and Attempt fences are refused). */
const SERVICE_CAPABILITIES: readonly RunnerCapabilityId[] = ["fencedExecution", "attemptFencing"];

/**
 * `validation` lists the validation capability rows a runtime probe found toolchains for;
 * `advertised` is what the Runner finally advertises (the validation process skips providers
 * missing from it).
 */
export function runnerHandlers(
  workspace: Workspace,
  executor: Executor,
  validation: readonly RunnerCapabilityId[] = [],
  advertised?: () => readonly RunnerCapabilityId[],
): RunnerHandlers {
  const validationDeps = { executor, capabilities: () => advertised?.() ?? validation };
  const implemented: Record<string, ImplementedTool> = {
    read_files: { capabilities: ["readFiles"], run: (a: Args) => workspace.readFiles(a as never) },
    list_project_files: { capabilities: ["searchTexts"], run: (a: Args) => workspace.listProjectFiles(a as never) },
    search_project_texts: { capabilities: ["searchTexts", "searchLowContext"], run: (a: Args) => workspace.searchProjectTexts(a as never) },
    search_file_context: { capabilities: ["searchLowContext"], run: (a: Args) => workspace.searchFileContext(a as never) },
    edit_project_files: { capabilities: ["applyTextEdit", "applyTextEditExpectedMatchCount"], run: (a: Args) => workspace.editProjectFiles(a as never) },
    import_host_files: { capabilities: ["hostFileImport"], run: (a: Args) => workspace.importHostFiles(a as never) },
    read_workspace_changes: { capabilities: ["gitReview"], run: (a: Args) => workspace.readWorkspaceChanges(a as never) },
    read_git_diff_hunks: { capabilities: ["gitReview"], run: (a: Args) => workspace.readGitDiffHunks(a as never) },
    read_git_review_summary: { capabilities: ["gitReview"], run: (a: Args) => workspace.readGitReviewSummary(a as never) },
    run_process: { capabilities: ["processExecution"], run: (a: Args, signal: AbortSignal) => executor.runProcess(a as never, signal) },
    run_shell: {
      capabilities: ["shellExecution", "bashLogin"],
      // The catalog's run_shell default is sh; the executor's own default is not relied on.
      run: (a: Args, signal: AbortSignal) => executor.runShell({ ...(a as object), shell: (a["shell"] as "sh" | "bash" | undefined) ?? "sh" } as never, signal),
    },
    run_script: { capabilities: ["pythonScript"], run: (a: Args, signal: AbortSignal) => executor.runScript(a as never, signal) },
    run_detached_process: { capabilities: ["detachedJobs"], run: (a: Args) => executor.runDetachedProcess(a as never) },
    observe_jobs: { capabilities: [], run: async (a: Args) => executor.observeJobs(a as never) },
    wait_for_job_terminal: { capabilities: [], run: (a: Args, signal: AbortSignal) => executor.waitForJobTerminal(a as never, signal) },
    project_validate: { capabilities: validation, run: (a: Args, signal: AbortSignal) => runValidation(validationDeps, "project_validate", a, signal) },
    cargo_check: { capabilities: [], run: (a: Args, signal: AbortSignal) => runValidation(validationDeps, "cargo_check", a, signal) },
    cargo_test: { capabilities: [], run: (a: Args, signal: AbortSignal) => runValidation(validationDeps, "cargo_test", a, signal) },
    go_test: { capabilities: [], run: (a: Args, signal: AbortSignal) => runValidation(validationDeps, "go_test", a, signal) },
  };
  const provided = new Set<RunnerCapabilityId>(SERVICE_CAPABILITIES);
  for (const tool of Object.values(implemented)) for (const id of tool.capabilities) provided.add(id);
  return {
    tools: Object.fromEntries(Object.entries(implemented).map(([name, tool]) => [name, tool.run])),
    capabilities: runnerCapabilityCatalog.filter((row) => provided.has(row.id)).map((row) => row.id),
  };
}
