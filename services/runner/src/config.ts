import { readConfig } from "@webcodex/platform";
import type { Env } from "@webcodex/platform";

export const runnerConfigSpec = {
  port: { kind: "int", env: "WEBCODEX_PORT", default: 8085, min: 0, max: 65535 },
  host: { kind: "string", env: "WEBCODEX_HOST", default: "0.0.0.0" },
  root: { kind: "string", env: "WEBCODEX_RUNNER_ROOT", required: true },
  brokerUrl: { kind: "string", env: "WEBCODEX_RUNNER_BROKER_URL", required: true },
  clientId: { kind: "string", env: "WEBCODEX_RUNNER_CLIENT_ID", required: true },
  projectId: { kind: "string", env: "WEBCODEX_RUNNER_PROJECT_ID", required: true },
  runnerId: { kind: "string", env: "WEBCODEX_RUNNER_ID" },
  advertiseUrl: { kind: "string", env: "WEBCODEX_RUNNER_ADVERTISE_URL" },
  /** Runner credential (never a Host credential): sent on registration, required on Execute/Describe. */
  runnerToken: { kind: "string", env: "WEBCODEX_RUNNER_TOKEN" },
  logLevel: { kind: "enum", env: "WEBCODEX_LOG_LEVEL", values: ["debug", "info", "warn", "error", "silent"], default: "info" },
  /** "on": programs are spawned by a small helper process (fast forks); "off": the Runner forks itself. */
  spawnHost: { kind: "enum", env: "WEBCODEX_RUNNER_SPAWN_HOST", values: ["on", "off"], default: "on" },
} as const;

export const loadConfig = (env: Env) => readConfig(runnerConfigSpec, env);

/** WEBCODEX_RUNNER_SPAWN_HOST alone, for hosts of an in-process Runner (`webcodex dev`). */
export function loadSpawnHostSetting(env: Env): boolean {
  return readConfig({ spawnHost: runnerConfigSpec.spawnHost }, env).spawnHost === "on";
}
