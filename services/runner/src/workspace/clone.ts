/**
 * Seeds a new workspace from a git repository: the Runner clones it itself. The clone goes
 * to a temporary directory beside the workspace and is renamed into place only when it
 * succeeded, so a failed clone leaves nothing behind.
 *
 * The credential (per tenant, from the operator) travels to git only as an HTTP header in
 * git's environment configuration (GIT_CONFIG_*): never in argv, the URL, a file, a log line
 * or a result, and only to URLs under its `url_prefix` (a credential without one is never
 * sent). git's own messages are reduced to a detail code and never returned.
 *
 * Egress: the repository's host is resolved once; a name or address on a loopback,
 * link-local, private, shared or cluster range is refused (unless the operator allow-lists it,
 * WEBCODEX_CLONE_ALLOW_HOSTS), before any connection, with one detail code; otherwise git is
 * pinned to the address resolved (http.curloptResolve; git:// URLs are rewritten to it), so a
 * second lookup cannot move the clone elsewhere.
 *
 * Where the Job sandbox can be made (exec/sandbox.ts), git runs in it, as the project's user
 * (`owner`), seeing nothing but the directory it clones into.
 */
import { spawn } from "node:child_process";
import { chownSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import { privateHome } from "../exec/job-user.js";
import { detectSandbox, sandboxCommand } from "../exec/sandbox.js";
import type { SandboxSupport } from "../exec/sandbox.js";
import { resolveCloneTarget } from "./clone-egress.js";

export interface GitCredential {
  username: string;
  password: string;
  /** Only URLs under this prefix get the credential (e.g. https://git.example.com/); without one the credential is never sent. */
  urlPrefix?: string;
}

/** True when `credential` may be sent with a clone of `url`: the URL starts with its (non-empty) prefix. */
export function credentialApplies(credential: GitCredential, url: string): boolean {
  const prefix = credential.urlPrefix;
  if (prefix === undefined || prefix === "" || !url.startsWith(prefix)) return false;
  // "https://git.example.com" must not cover "https://git.example.com.evil.test/".
  return prefix.endsWith("/") || url.length === prefix.length || url[prefix.length] === "/";
}

export interface CloneOptions {
  url: string;
  ref?: string;
  /** The workspace directory; must not exist yet. */
  dir: string;
  credential?: GitCredential;
  timeoutMs?: number;
  /** Who the clone (and so the workspace) belongs to: the project's uid (job-user.ts projectUid); default the Runner's user. */
  owner?: { uid: number; gid: number };
  /** The sandbox git runs in; default: detected (`off` runs git unsandboxed). */
  sandbox?: SandboxSupport | "off";
  /** Hosts (names or addresses) on private ranges the operator allows cloning from (WEBCODEX_CLONE_ALLOW_HOSTS). */
  allowHosts?: readonly string[];
}

const SCHEMES = new Set(["https:", "http:", "git:"]);

/** Why a URL is refused before any network traffic, or undefined when it may be cloned. */
export function cloneUrlProblem(url: string): ToolFailure | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return toolFailure(ReasonCode.invalidValue, PipelineStage.normalization, {
      detail_code: "invalid_git_url",
      evidence: { field: "/source/git/url" },
      message: "url must be an https:// or git:// URL.",
    });
  }
  if (!SCHEMES.has(parsed.protocol)) {
    return toolFailure(ReasonCode.invalidValue, PipelineStage.normalization, {
      detail_code: "unsupported_url_scheme",
      evidence: { field: "/source/git/url" },
      message: "Only https://, http:// and git:// repositories can be cloned.",
    });
  }
  if (parsed.username || parsed.password) {
    return toolFailure(ReasonCode.invalidValue, PipelineStage.normalization, {
      detail_code: "credential_in_url",
      evidence: { field: "/source/git/url" },
      message: "Credentials never go in the URL; your operator configures them.",
    });
  }
  return undefined;
}

/** git's stderr → a detail code; the text itself goes nowhere. */
function classify(stderr: string): { detail: string; message: string } {
  const s = stderr.toLowerCase();
  if (/remote branch .* not found|couldn't find remote ref|could not find remote branch/.test(s))
    return { detail: "ref_not_found", message: "The repository has no such branch or tag." };
  if (/repository not exported|does not appear to be a git repository/.test(s))
    return { detail: "repository_unreachable", message: "The repository could not be reached at this URL." };
  if (/authentication failed|could not read username|could not read password|returned error: 40[13]|http basic: access denied/.test(s)) {
    return { detail: "authentication_failed", message: "The repository refused the configured credential (or needs one); ask your operator." };
  }
  if (
    /could not resolve host|connection refused|unable to connect|failed to connect|timed out|not found|does not appear to be a git repository|repository .* not exported|returned error: 404/.test(
      s,
    )
  ) {
    return { detail: "repository_unreachable", message: "The repository could not be reached at this URL." };
  }
  return { detail: "clone_failed", message: "git could not clone the repository." };
}

/** WEBCODEX_CLONE_ALLOW_HOSTS: comma-separated hosts on private ranges that may be cloned from. */
export function allowedHostsFromEnv(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env["WEBCODEX_CLONE_ALLOW_HOSTS"] ?? "")
    .split(",")
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== "");
}

/** Clones `url` into `dir`; undefined on success, else a structured failure (and no `dir`). */
export async function cloneWorkspace(o: CloneOptions): Promise<ToolFailure | undefined> {
  const problem = cloneUrlProblem(o.url);
  if (problem) return problem;
  const target = await resolveCloneTarget(o.url, o.allowHosts ?? allowedHostsFromEnv());
  if ("failure" in target) return target.failure;
  mkdirSync(dirname(o.dir), { recursive: true, mode: 0o700 });
  const tmp = join(dirname(o.dir), `.clone-${randomBytes(6).toString("hex")}`);
  mkdirSync(tmp, { mode: 0o755 });
  if (o.owner !== undefined) chownSync(tmp, o.owner.uid, o.owner.gid);
  const support = o.sandbox === "off" ? undefined : (o.sandbox ?? detectSandbox());
  const env: Record<string, string> = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: tmpdir(),
    LC_ALL: "C",
    GIT_TERMINAL_PROMPT: "0",
    GIT_ASKPASS: "/bin/false",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_ALLOW_PROTOCOL: "http:https:git",
  };
  const config: Array<[string, string]> = [];
  if (target.pin !== undefined) config.push(["http.curloptResolve", target.pin]);
  if (o.credential && credentialApplies(o.credential, o.url)) {
    const basic = Buffer.from(`${o.credential.username}:${o.credential.password}`).toString("base64");
    config.push([`http.${o.credential.urlPrefix}.extraHeader`, `Authorization: Basic ${basic}`]);
  }
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  if (config.length > 0) env["GIT_CONFIG_COUNT"] = String(config.length);
  const args = ["clone", "--quiet", ...(o.ref ? ["--branch", o.ref] : []), "--", target.url, tmp];
  const home = support?.available ? privateHome(o.owner) : undefined;
  const result = await new Promise<{ code: number | null; stderr: string; timedOut: boolean }>((resolve) => {
    let child;
    if (support?.available && home !== undefined) {
      const cmd = sandboxCommand(support, { workspace: tmp, ...(o.owner ? { user: o.owner } : {}), home }, "git", args, tmp, {
        ...env,
        HOME: home,
        TMPDIR: "/tmp",
      });
      child = spawn(cmd.program, cmd.args, { env: cmd.env, stdio: ["ignore", "ignore", "pipe"] });
    } else {
      child = spawn("git", args, { env, stdio: ["ignore", "ignore", "pipe"], ...(o.owner ? { uid: o.owner.uid, gid: o.owner.gid } : {}) });
    }
    let stderr = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, o.timeoutMs ?? 300_000);
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (c: string) => {
      if (stderr.length < 16_384) stderr += c;
    });
    child.once("error", () => {
      clearTimeout(timer);
      resolve({ code: -1, stderr: "spawn failed", timedOut });
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, timedOut });
    });
  });
  if (home !== undefined) rmSync(home, { recursive: true, force: true });
  if (result.code !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    const { detail, message } = result.timedOut ? { detail: "clone_timed_out", message: "Cloning took too long." } : classify(result.stderr);
    return toolFailure(ReasonCode.cloneFailed, PipelineStage.execution, { detail_code: detail, message });
  }
  renameSync(tmp, o.dir);
  return undefined;
}

/**
 * A Runner pod's start: when its workspace volume holds nothing yet (a filesystem's
 * lost+found aside) and a source is set, clone into it. The clone lands in a directory on the
 * same volume and its entries are moved into the root, so a failure leaves the volume empty.
 * Returns the failure, or undefined when the workspace is ready (cloned now or before).
 */
export async function seedWorkspaceRoot(root: string, o: Omit<CloneOptions, "dir">): Promise<ToolFailure | undefined> {
  const entries = readdirSync(root).filter((e) => e !== "lost+found" && !e.startsWith(".clone-"));
  if (entries.length > 0) return undefined;
  const staging = join(root, ".clone-staging");
  rmSync(staging, { recursive: true, force: true });
  const failure = await cloneWorkspace({ ...o, dir: staging });
  if (failure) return failure;
  for (const entry of readdirSync(staging)) renameSync(join(staging, entry), join(root, entry));
  rmSync(staging, { recursive: true, force: true });
  return undefined;
}

/** Where Kubernetes reads a container's last words: the failure, for the broker to report. */
export function writeTerminationMessage(failure: ToolFailure, path = "/dev/termination-log"): void {
  try {
    writeFileSync(
      path,
      JSON.stringify({ reason_code: failure.reason_code, detail_code: failure.detail_code, failure_stage: failure.failure_stage, message: failure.message }),
    );
  } catch {
    // Not in a pod: the exit code and the log line say it.
  }
}
