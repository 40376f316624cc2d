/**
 * The tools this Runner binary implements, bound to one workspace and one executor, and
 * the capabilities it therefore advertises. The signal is the call's: when the caller
 * abandons a run_* call before it returns, its process is stopped.
 */
import type { RunnerHandlers } from "./runner-service.js";
import type { Workspace } from "./workspace/index.js";
import type { Executor } from "./exec/index.js";

type Args = Record<string, unknown>;

export function runnerHandlers(workspace: Workspace, executor: Executor): RunnerHandlers {
  return {
    tools: {
      read_files: (a: Args) => workspace.readFiles(a as never),
      list_project_files: (a: Args) => workspace.listProjectFiles(a as never),
      search_project_texts: (a: Args) => workspace.searchProjectTexts(a as never),
      edit_project_files: (a: Args) => workspace.editProjectFiles(a as never),
      read_workspace_changes: (a: Args) => workspace.readWorkspaceChanges(a as never),
      read_git_diff_hunks: (a: Args) => workspace.readGitDiffHunks(a as never),
      read_git_review_summary: (a: Args) => workspace.readGitReviewSummary(a as never),
      run_process: (a: Args, signal: AbortSignal) => executor.runProcess(a as never, signal),
      // The catalog's run_shell default is sh; the executor's own default is not relied on.
      run_shell: (a: Args, signal: AbortSignal) => executor.runShell({ ...(a as object), shell: (a["shell"] as "sh" | "bash" | undefined) ?? "sh" } as never, signal),
      run_script: (a: Args, signal: AbortSignal) => executor.runScript(a as never, signal),
      run_detached_process: (a: Args) => executor.runDetachedProcess(a as never),
      observe_jobs: async (a: Args) => executor.observeJobs(a as never),
      wait_for_job_terminal: (a: Args, signal: AbortSignal) => executor.waitForJobTerminal(a as never, signal),
    },
    capabilities: [
      "readFiles", "searchTexts", "applyTextEdit", "applyTextEditExpectedMatchCount", "gitReview",
      "processExecution", "shellExecution", "bashLogin", "pythonScript", "detachedJobs",
      // Enforced by the RunnerService every handler runs behind (stale fences are refused).
      "fencedExecution",
    ],
  };
}
