/**
 * The only way the workspace talks to git: `execFile("git", ...)` (through the Runner's
 * spawner, so it can run from the spawn host), never a shell. The repository is untrusted
 * input: whoever can write the workspace can write `.git/config` and `.gitattributes`, and a
 * read by a read-only caller must not run what they planted. So every invocation
 *  - starts from the minimal environment (no Runner credential, no GIT_* of the caller),
 *    with GIT_CONFIG_NOSYSTEM=1 and GIT_CONFIG_GLOBAL=/dev/null (no system or user config);
 *  - overrides every config key that names a program: core.fsmonitor, core.hooksPath,
 *    core.pager (and --no-pager), core.editor, core.sshCommand, core.askPass, core.gitProxy,
 *    core.alternateRefsCommand, credential helpers, gpg programs, and, found
 *    by listing the repository's own config first, every `filter.<x>.*`, `diff.<x>.textconv`
 *    / `diff.<x>.command`, `merge.<x>.driver`, `pager.<cmd>` and any other `*.helper`,
 *    `*.program`, `*.command`, `*Command` or `*.cmd` key.
 * The overrides travel as environment configuration (GIT_CONFIG_COUNT / GIT_CONFIG_KEY_<n> /
 * GIT_CONFIG_VALUE_<n>), which, like `-c`, wins over the repository's config but keeps key and
 * value apart: a subsection holding `=` (`[filter "x=y"]`) cannot split a `-c key=value`
 * into another key. An emptied driver is never run; `diff.external` cannot be emptied (git
 * would try to run ""), so the diff-family commands always get `--no-ext-diff --no-textconv`.
 * Observation commands take no locks. git itself runs in the Job sandbox (the Runner's
 * spawner), as the Job user, with a time limit: should anything slip through, it runs with no
 * more rights than a Job and dies with git.
 */
import { PipelineStage, ReasonCode, ToolFailureError, fail, toolFailure } from "@webcodex/contracts";
import { minimalProcessEnv } from "../exec/child-env.js";
import { execFileVia } from "../exec/exec-file.js";
import type { Spawner } from "../exec/spawner.js";

const MAX_OUTPUT_BYTES = 64 * 1024 * 1024;
const MAX_CONFIG_LIST_BYTES = 1024 * 1024;
/** The longest any one git command of a tool may run. */
const GIT_TIMEOUT_MS = 120_000;

/** Settings that hold regardless of what the repository's config says. */
const FIXED_CONFIG: ReadonlyArray<readonly [string, string]> = [
  ["core.quotepath", "off"],
  ["color.ui", "never"],
  ["diff.noprefix", "false"],
  ["core.fsmonitor", "false"],
  ["core.hooksPath", "/dev/null"],
  ["core.pager", "cat"],
  ["core.editor", ":"],
  ["core.sshCommand", "false"],
  ["core.askPass", ""],
  ["core.gitProxy", ""],
  ["core.alternateRefsCommand", ""],
  ["core.untrackedCache", "false"],
  ["credential.helper", ""],
  ["log.showSignature", "false"],
  ["gpg.program", "false"],
  ["gpg.openpgp.program", "false"],
  ["gpg.x509.program", "false"],
  ["gpg.ssh.program", "false"],
  ["protocol.allow", "never"],
];

/** Repository config keys (lower-cased by `git config --list`) whose value git may run as a program. */
const PROGRAM_KEY =
  /^(?:filter\..+\.(?:clean|smudge|process)|diff\..+\.(?:textconv|command)|merge\..+\.driver|pager\..+|.+\.(?:helper|program|command|cmd|editor|askpass)|.+command)$/;

/** Commands that may run an external diff or textconv driver unless told not to. */
const DIFF_FAMILY = new Set(["diff", "log", "show"]);

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

/** Minimal environment plus what keeps git from reading anything but the repository itself. */
export function gitEnv(): Record<string, string> {
  return {
    ...minimalProcessEnv(),
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_ATTR_NOSYSTEM: "1",
    GIT_OPTIONAL_LOCKS: "0",
    GIT_TERMINAL_PROMPT: "0",
    GIT_PAGER: "cat",
    PAGER: "cat",
    LC_ALL: "C",
  };
}

/** Environment-configuration overrides for one repository's config, listed once per context (one tool call). */
const overridesByContext = new WeakMap<GitContext, Promise<Record<string, string>>>();

/** GIT_CONFIG_COUNT / _KEY_<n> / _VALUE_<n> for `pairs`: command-line-level config with key and value kept apart. */
export function configEnv(pairs: ReadonlyArray<readonly [string, string]>): Record<string, string> {
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(pairs.length) };
  pairs.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

function configOverrides(git: GitContext): Promise<Record<string, string>> {
  let overrides = overridesByContext.get(git);
  if (overrides === undefined) {
    overrides = listProgramKeys(git).then((keys) => {
      const pairs: Array<readonly [string, string]> = [...FIXED_CONFIG];
      for (const key of keys) {
        // A filter marked required would fail every read once emptied; reads must still work.
        pairs.push([key, ""]);
        if (key.startsWith("filter.")) pairs.push([`${key.slice(0, key.lastIndexOf("."))}.required`, "false"]);
      }
      return configEnv(pairs);
    });
    overridesByContext.set(git, overrides);
  }
  return overrides;
}

/** Keys of the repository's own config (and what it includes) that name programs. `git config` runs nothing. */
function listProgramKeys(git: GitContext): Promise<string[]> {
  return new Promise((resolve) => {
    execFileVia(
      git.spawner,
      "git",
      ["--no-pager", "config", "--includes", "--list", "--name-only", "-z"],
      { cwd: git.cwd, env: gitEnv(), maxBuffer: MAX_CONFIG_LIST_BYTES, timeoutMs: GIT_TIMEOUT_MS },
      (error, stdout) => {
        // Outside a repository (or no config) there is nothing to neutralize; the caller's own command reports that.
        const keys = new Set(
          stdout
            .split("\0")
            .map((k) => k.trim())
            .filter((k) => PROGRAM_KEY.test(k)),
        );
        resolve(error !== null && stdout === "" ? [] : [...keys]);
      },
    );
  });
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
  return configOverrides(git).then(
    (overrides) =>
      new Promise((resolve, reject) => {
        const [command, ...rest] = args;
        const safeArgs = command !== undefined && DIFF_FAMILY.has(command) ? [command, "--no-ext-diff", "--no-textconv", ...rest] : args;
        const env = { ...gitEnv(), ...overrides };
        execFileVia(
          git.spawner,
          "git",
          ["--no-pager", ...safeArgs],
          { cwd: git.cwd, env, maxBuffer: maxBytes, timeoutMs: GIT_TIMEOUT_MS },
          (error, stdout, stderr) => {
            if (error === null) {
              resolve({ output: { code: 0, stdout, stderr }, cut: false });
              return;
            }
            const code = error.code;
            if (code === "ENOENT") {
              reject(new ToolFailureError(toolFailure(ReasonCode.dependencyUnavailable, PipelineStage.observation, { detail_code: "git_unavailable" })));
            } else if (code === "ETIMEDOUT") {
              reject(
                new ToolFailureError(
                  toolFailure(ReasonCode.gitFailed, PipelineStage.observation, {
                    detail_code: "git_timed_out",
                    message: `git took longer than ${GIT_TIMEOUT_MS / 1000} s and was stopped.`,
                  }),
                ),
              );
            } else if (code === "ERR_CHILD_PROCESS_STDIO_MAXBUFFER" && acceptCut) {
              resolve({ output: { code: 0, stdout, stderr }, cut: true });
            } else if (code === "ERR_CHILD_PROCESS_STDIO_MAXBUFFER") {
              reject(
                new ToolFailureError(
                  toolFailure(ReasonCode.gitFailed, PipelineStage.observation, {
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
                  toolFailure(ReasonCode.gitFailed, PipelineStage.observation, {
                    detail_code: typeof code === "number" ? `exit_${code}` : "spawn_failed",
                    evidence: { command: args[0] ?? "", stderr_tail: stderr.trim().slice(-500) },
                  }),
                ),
              );
            }
          },
        );
      }),
  );
}

/** Fails with `not_a_git_repository` unless `cwd` is inside a work tree. */
export async function assertGitRepository(git: GitContext): Promise<void> {
  const out = await runGit(git, ["rev-parse", "--is-inside-work-tree"], [0, 128]);
  if (out.code !== 0 || out.stdout.trim() !== "true") {
    fail(ReasonCode.notAGitRepository, PipelineStage.resolution, { message: "The project root is not inside a git work tree." });
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
    fail(ReasonCode.invalidValue, PipelineStage.resolution, { detail_code: "unknown_base", evidence: { base: revision } });
  }
  const out = await runGit(git, ["rev-parse", "-q", "--verify", "--end-of-options", `${revision}^{commit}`], [0, 1, 128]);
  if (out.code !== 0) {
    fail(ReasonCode.invalidValue, PipelineStage.resolution, { detail_code: "unknown_base", evidence: { base: revision } });
  }
  return out.stdout.trim();
}
