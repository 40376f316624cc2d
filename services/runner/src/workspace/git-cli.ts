/**
 * The only way the workspace talks to git: `execFile("git", ...)` (through the Runner's
 * spawner, so it can run from the spawn host), never a shell, with a
 * fixed environment so the caller's GIT_* variables, pager, colours, fsmonitor hooks and
 * external diff drivers cannot change what is observed. Observation commands take no locks.
 */
import { FailureStage, ReasonCode, ToolFailureError, fail, toolFailure } from "@webcodex/contracts";
import { execFileVia } from "../exec/exec-file.js";
import type { Spawner } from "../exec/spawner.js";

const MAX_OUTPUT_BYTES = 64 * 1024 * 1024;
const CONFIG = ["-c", "core.quotepath=off", "-c", "color.ui=never", "-c", "core.fsmonitor=false", "-c", "diff.noprefix=false"];

/** Where git runs and how it is started. */
export interface GitContext {
  cwd: string;
  spawner: Spawner;
}

export interface GitOutput {
  code: number;
  stdout: string;
  stderr: string;
}

function gitEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("GIT_") && value !== undefined) env[key] = value;
  }
  return { ...env, GIT_OPTIONAL_LOCKS: "0", GIT_TERMINAL_PROMPT: "0", LC_ALL: "C" };
}

/** Runs git in `git.cwd`; exit codes outside `okCodes` become `git_failed`. */
export function runGit(git: GitContext, args: readonly string[], okCodes: readonly number[] = [0]): Promise<GitOutput> {
  return execGit(git, args, okCodes, MAX_OUTPUT_BYTES, false).then(({ output }) => output);
}

export interface BoundedGitOutput {
  stdout: string;
  /** git wrote more than `maxBytes`: stdout holds only its first part and git was stopped. */
  cut: boolean;
}

/**
 * Runs git for an observation that may be larger than is worth reading: past `maxBytes` of
 * stdout git is stopped and what was read is returned with `cut: true`, so the caller can
 * report a bounded, explicitly incomplete answer instead of failing.
 */
export async function runGitBounded(git: GitContext, args: readonly string[], maxBytes: number): Promise<BoundedGitOutput> {
  const { output, cut } = await execGit(git, args, [0], maxBytes, true);
  return { stdout: output.stdout, cut };
}

function execGit(
  git: GitContext,
  args: readonly string[],
  okCodes: readonly number[],
  maxBytes: number,
  acceptCut: boolean,
): Promise<{ output: GitOutput; cut: boolean }> {
  return new Promise((resolve, reject) => {
    execFileVia(git.spawner, "git", [...CONFIG, ...args], { cwd: git.cwd, env: gitEnv(), maxBuffer: maxBytes }, (error, stdout, stderr) => {
      if (error === null) {
        resolve({ output: { code: 0, stdout, stderr }, cut: false });
        return;
      }
      const code = error.code;
      if (code === "ENOENT") {
        reject(new ToolFailureError(toolFailure(ReasonCode.dependencyUnavailable, FailureStage.observation, { detail_code: "git_unavailable" })));
      } else if (code === "ERR_CHILD_PROCESS_STDIO_MAXBUFFER" && acceptCut) {
        resolve({ output: { code: 0, stdout, stderr }, cut: true });
      } else if (code === "ERR_CHILD_PROCESS_STDIO_MAXBUFFER") {
        reject(
          new ToolFailureError(
            toolFailure(ReasonCode.gitFailed, FailureStage.observation, {
              detail_code: "output_too_large",
              message: "git produced more output than can be observed at once; narrow it with paths.",
            }),
          ),
        );
      } else if (typeof code === "number" && okCodes.includes(code)) {
        resolve({ output: { code, stdout, stderr }, cut: false });
      } else {
        reject(
          new ToolFailureError(
            toolFailure(ReasonCode.gitFailed, FailureStage.observation, {
              detail_code: typeof code === "number" ? `exit_${code}` : "spawn_failed",
              evidence: { command: args[0] ?? "", stderr_tail: stderr.trim().slice(-500) },
            }),
          ),
        );
      }
    });
  });
}

/** Fails with `not_a_git_repository` unless `cwd` is inside a work tree. */
export async function assertGitRepository(git: GitContext): Promise<void> {
  const out = await runGit(git, ["rev-parse", "--is-inside-work-tree"], [0, 128]);
  if (out.code !== 0 || out.stdout.trim() !== "true") {
    fail(ReasonCode.notAGitRepository, FailureStage.resolution, { message: "The project root is not inside a git work tree." });
  }
}

/** HEAD commit id, or undefined on an unborn branch. */
export async function headCommit(git: GitContext): Promise<string | undefined> {
  const out = await runGit(git, ["rev-parse", "-q", "--verify", "HEAD^{commit}"], [0, 1]);
  return out.code === 0 ? out.stdout.trim() : undefined;
}

/** Current branch name, or undefined when HEAD is detached. */
export async function currentBranch(git: GitContext): Promise<string | undefined> {
  const out = await runGit(git, ["symbolic-ref", "-q", "--short", "HEAD"], [0, 1]);
  return out.code === 0 ? out.stdout.trim() : undefined;
}

/** Id of the empty tree in this repository's hash algorithm, the base for an unborn HEAD. */
export async function emptyTree(git: GitContext): Promise<string> {
  return (await runGit(git, ["hash-object", "-t", "tree", "/dev/null"])).stdout.trim();
}

/** Commit id of a caller-supplied revision; anything unresolvable is `invalid_value`. */
export async function resolveCommit(git: GitContext, revision: string): Promise<string> {
  if (revision === "" || revision.startsWith("-")) {
    fail(ReasonCode.invalidValue, FailureStage.resolution, { detail_code: "unknown_base", evidence: { base: revision } });
  }
  const out = await runGit(git, ["rev-parse", "-q", "--verify", "--end-of-options", `${revision}^{commit}`], [0, 1, 128]);
  if (out.code !== 0) {
    fail(ReasonCode.invalidValue, FailureStage.resolution, { detail_code: "unknown_base", evidence: { base: revision } });
  }
  return out.stdout.trim();
}
