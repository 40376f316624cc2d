import { runnerCapabilityByWire, runnerCapabilityCatalog } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import { ConfigError, readConfig } from "@webcodex/platform";
import type { Env } from "@webcodex/platform";
import { globToRegExp } from "./workspace/path-policy.js";
import type { ContainmentConfig } from "./exec/containment.js";
import { jobUserSettingProblem } from "./exec/job-user.js";
import type { SandboxSetting } from "./exec/sandbox.js";

export const runnerConfigSpec = {
  port: { kind: "int", env: "WEBCODEX_PORT", default: 8085, min: 0, max: 65535 },
  host: { kind: "string", env: "WEBCODEX_HOST" },
  root: { kind: "string", env: "WEBCODEX_RUNNER_ROOT", required: true },
  // A created Project's source: cloned into an empty root at start, with the tenant's credential.
  cloneUrl: { kind: "string", env: "WEBCODEX_RUNNER_CLONE_URL", doc: "Repository an empty workspace is cloned from at start" },
  cloneRef: { kind: "string", env: "WEBCODEX_RUNNER_CLONE_REF", doc: "Branch or tag to clone (default: the remote's HEAD)" },
  cloneUsername: { kind: "string", env: "WEBCODEX_RUNNER_CLONE_USERNAME", doc: "Clone credential user (from the tenant's Secret)" },
  clonePassword: { kind: "string", env: "WEBCODEX_RUNNER_CLONE_PASSWORD", doc: "Clone credential password or token (from the tenant's Secret); never logged" },
  cloneUrlPrefix: {
    kind: "string",
    env: "WEBCODEX_RUNNER_CLONE_URL_PREFIX",
    doc: "Only clone URLs under this prefix get the credential (from the tenant's Secret); without it the credential is never sent",
  },
  brokerUrl: { kind: "string", env: "WEBCODEX_RUNNER_BROKER_URL", required: true },
  clientId: { kind: "string", env: "WEBCODEX_RUNNER_CLIENT_ID", required: true },
  projectId: { kind: "string", env: "WEBCODEX_RUNNER_PROJECT_ID", required: true },
  runnerId: { kind: "string", env: "WEBCODEX_RUNNER_ID" },
  advertiseUrl: { kind: "string", env: "WEBCODEX_RUNNER_ADVERTISE_URL" },
  /** Runner credential (never a Host credential): sent on registration, required on Execute/Describe. */
  runnerToken: { kind: "string", env: "WEBCODEX_RUNNER_TOKEN" },
  /** Write-transaction journal directory, outside the workspace (default: a sibling of the root). */
  stateDir: { kind: "string", env: "WEBCODEX_RUNNER_STATE_DIR" },
  /** File holding the Runner credential (a mounted Secret): nothing secret in the environment. */
  runnerTokenFile: { kind: "string", env: "WEBCODEX_RUNNER_TOKEN_FILE" },
  logLevel: { kind: "enum", env: "WEBCODEX_LOG_LEVEL", values: ["debug", "info", "warn", "error", "silent"], default: "info" },
  /** Serve grpc.reflection.v1.ServerReflection on the service port (grpcurl); off by default. */
  grpcReflection: { kind: "bool", env: "WEBCODEX_GRPC_REFLECTION", default: false },
} as const;

/** What a Runner's behaviour is configured from, whether it runs alone (`webcodex runner`) or embedded (`webcodex dev`). */
export const runnerSettingsSpec = {
  /** "on": programs are spawned by a small helper process (fast forks); "off": the Runner forks itself. */
  spawnHost: { kind: "enum", env: "WEBCODEX_RUNNER_SPAWN_HOST", values: ["on", "off"], default: "on" },
  /** Comma-separated project-relative globs refused for writes, replacing the defaults; `.git/` is refused regardless. */
  sensitiveWriteGlobs: { kind: "string", env: "WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS" },
  /** Comma-separated capability wire names this Runner withholds: not advertised, and calls needing them refused. */
  disabledCapabilities: { kind: "string", env: "WEBCODEX_RUNNER_DISABLED_CAPABILITIES" },
  /** "auto": a cgroup per Job where the machine allows it; "process_tree": Job process tracking only. */
  containment: { kind: "enum", env: "WEBCODEX_RUNNER_CONTAINMENT", values: ["auto", "process_tree"], default: "auto" },
  /** Most processes (and threads) one Job may have at once, where Jobs get a cgroup. */
  jobPidsMax: { kind: "int", env: "WEBCODEX_RUNNER_JOB_PIDS_MAX", default: 512, min: 16, max: 1_000_000 },
  /** Most memory one Job's processes may use together, in MiB, where Jobs get a cgroup. */
  /** Who Jobs (and git, rg) run as: auto, runner (the Runner's own user) or <uid>[:<gid>]; see docs/security.md. */
  jobUser: { kind: "string", env: "WEBCODEX_RUNNER_JOB_USER", default: "auto" },
  jobMemoryMaxMb: { kind: "int", env: "WEBCODEX_RUNNER_JOB_MEMORY_MAX_MB", default: 2048, min: 16, max: 1_048_576 },
  /** "auto": every program runs in a bubblewrap sandbox where one can be made; "required": refuse to start without; "off": never. */
  sandbox: { kind: "enum", env: "WEBCODEX_RUNNER_SANDBOX", values: ["auto", "required", "off"], default: "auto" },
  /** Absolute path of the bubblewrap binary (default /usr/bin/bwrap). */
  bwrap: { kind: "string", env: "WEBCODEX_RUNNER_BWRAP" },
} as const;

export interface RunnerSettings {
  spawnHost: boolean;
  /** Absent: the workspace's default globs. */
  sensitiveWriteGlobs?: string[];
  disabledCapabilities: RunnerCapabilityId[];
  containment: ContainmentConfig;
  /** auto, runner or <uid>[:<gid>] (WEBCODEX_RUNNER_JOB_USER). */
  jobUser: string;
  /** WEBCODEX_RUNNER_SANDBOX and WEBCODEX_RUNNER_BWRAP. */
  sandbox: SandboxSetting;
  bwrap?: string;
}

export function loadConfig(env: Env) {
  const problems: string[] = [];
  const config = collect(problems, () => readConfig(runnerConfigSpec, env));
  const settings = collect(problems, () => loadRunnerSettings(env));
  if (config === undefined || settings === undefined) throw new ConfigError(problems);
  return { ...config, ...settings };
}

/** The Runner settings alone, for hosts of an in-process Runner (`webcodex dev`). Every problem is reported in one ConfigError. */
export function loadRunnerSettings(env: Env): RunnerSettings {
  const raw = readConfig(runnerSettingsSpec, env);
  const problems: string[] = [];
  const settings: RunnerSettings = {
    spawnHost: raw.spawnHost === "on",
    disabledCapabilities: raw.disabledCapabilities === undefined ? [] : parseDisabledCapabilities(raw.disabledCapabilities, problems),
    jobUser: raw.jobUser,
    sandbox: raw.sandbox as SandboxSetting,
    ...(raw.bwrap === undefined ? {} : { bwrap: raw.bwrap }),
    containment: {
      mode: raw.containment === "process_tree" ? "process_tree" : "auto",
      pidsMax: raw.jobPidsMax,
      memoryMaxBytes: raw.jobMemoryMaxMb * 1024 * 1024,
    },
  };
  const jobUserProblem = jobUserSettingProblem(raw.jobUser);
  if (jobUserProblem !== undefined) problems.push(`WEBCODEX_RUNNER_JOB_USER ${jobUserProblem}`);
  if (raw.sensitiveWriteGlobs !== undefined) settings.sensitiveWriteGlobs = parseGlobList(raw.sensitiveWriteGlobs, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return settings;
}

function collect<T>(problems: string[], read: () => T): T | undefined {
  try {
    return read();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems);
    return undefined;
  }
}

const GLOBS_ENV = runnerSettingsSpec.sensitiveWriteGlobs.env;
const CAPABILITIES_ENV = runnerSettingsSpec.disabledCapabilities.env;

/** Splits at commas outside `{...}`, so a brace alternative such as `*.{pem,key}` stays one glob. */
export function parseGlobList(value: string, problems: string[]): string[] {
  const globs: string[] = [];
  let depth = 0;
  let current = "";
  for (const ch of value) {
    if (ch === "," && depth === 0) {
      globs.push(current.trim());
      current = "";
      continue;
    }
    if (ch === "{") depth++;
    else if (ch === "}" && depth > 0) depth--;
    current += ch;
  }
  globs.push(current.trim());
  if (depth > 0) problems.push(`${GLOBS_ENV}: unclosed "{" in ${JSON.stringify(value)}`);
  const kept = globs.filter((g) => g !== "");
  if (kept.length === 0) problems.push(`${GLOBS_ENV} lists no glob; unset it to keep the defaults`);
  for (const glob of kept) {
    try {
      globToRegExp(glob);
    } catch {
      problems.push(`${GLOBS_ENV}: ${JSON.stringify(glob)} is not a valid glob`);
    }
  }
  return kept;
}

function parseDisabledCapabilities(value: string, problems: string[]): RunnerCapabilityId[] {
  const ids: RunnerCapabilityId[] = [];
  for (const name of value
    .split(",")
    .map((n) => n.trim())
    .filter((n) => n !== "")) {
    const row = runnerCapabilityByWire(name);
    if (row === undefined) {
      problems.push(`${CAPABILITIES_ENV}: unknown capability ${JSON.stringify(name)} (known: ${runnerCapabilityCatalog.map((r) => r.wire).join(", ")})`);
    } else if (row.baselineV2) {
      problems.push(`${CAPABILITIES_ENV}: ${name} is in the frozen V2 baseline every Runner must advertise; it cannot be withheld`);
    } else if (!ids.includes(row.id)) {
      ids.push(row.id);
    }
  }
  return ids;
}
