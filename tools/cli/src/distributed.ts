/**
 * Distributed mode on one machine (`webcodex up`): every service its own process on its own
 * port, HTTP/2 between them, Postgres and Redis by URL, plus one Runner process for a
 * project directory. The processes are the same entry points Kubernetes runs.
 */
import { randomBytes } from "node:crypto";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { realpathSync } from "node:fs";
import { createServer } from "node:net";
import { resolve } from "node:path";
import { runnerCredential } from "@webcodex/runner-broker";
import { logFormatFor } from "@webcodex/platform";
import { projectIdFor } from "./embedded.js";

import { SERVICES } from "./services.js";
export { SERVICES };

const portFree = (port: number) =>
  new Promise<boolean>((done) => {
    const probe = createServer();
    probe.once("error", () => done(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => done(true)));
  });

/** Thrown when a port `webcodex up` is to listen on is held by another process (one line, naming the port and the service). */
export class PortInUseError extends Error {
  constructor(
    readonly service: ServiceName,
    readonly port: number,
  ) {
    super(`port ${port} (for the ${service} service) is already in use on 127.0.0.1; stop what holds it or choose another --port`);
  }
}

async function refuseHeldPort(service: ServiceName, port: number): Promise<void> {
  if (!(await portFree(port))) throw new PortInUseError(service, port);
}

/**
 * A base port whose `count` consecutive ports are free on 127.0.0.1, chosen below Linux's
 * ephemeral range (32768+) so that outgoing connections cannot take one before the services
 * bind it. For tests and benchmarks that start several stacks on one machine.
 */
export async function findFreeBasePort(count: number = SERVICES.length, low = 20_000, high = 32_700): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = low + Math.floor(Math.random() * (high - low - count));
    let free = true;
    for (let i = 0; i < count && free; i++) free = await portFree(base + i);
    if (free) return base;
  }
  throw new Error(`no ${count} consecutive free ports between ${low} and ${high}`);
}
export type ServiceName = (typeof SERVICES)[number];

export interface DistributedOptions {
  basePort: number;
  postgresUrl: string;
  redisUrl: string;
  projectDir: string;
  clientId: string;
  /** Passed to the gateway as is (WEBCODEX_DEV_TOKEN / WEBCODEX_DEV_TOKENS_FILE). */
  gatewayEnv: Record<string, string>;
  /** Passed to the Runner as is (WEBCODEX_RUNNER_SPAWN_HOST, _SENSITIVE_WRITE_GLOBS, _DISABLED_CAPABILITIES). */
  runnerEnv?: Record<string, string>;
  extraEnv?: Record<string, string>;
  /**
   * Where create_project's workspaces live: the broker runs the local-process provisioner (one
   * `webcodex runner` process per created Project, under `<dir>/<tenant hash>/<project>`).
   * Without it the stack serves only `projectDir` and create_project answers no_provisioner.
   */
  workspacesDir?: string;
  heartbeatIntervalMs?: number;
  /** The services' shared signing key (WEBCODEX_SERVICE_KEY); default: a fresh random one. Never given to the Runner. */
  serviceKey?: string;
  /** Where child output goes; default: inherit. */
  stdio?: "inherit" | "pipe" | "ignore";
  /** How long one service may take to start and answer its readiness probe (default 30 s). */
  startTimeoutMs?: number;
  /**
   * The script each service process runs in place of this package's bin/webcodex.js, with the
   * same arguments: a test harness's launcher that installs test hooks.
   */
  cli?: string;
}

export interface DistributedStack {
  readonly ports: Record<ServiceName, number>;
  /** The key internal calls are signed with (for tests that play another service). */
  readonly serviceKey: string;
  /** The broker's Runner credential key; the Runner holds only its own credential derived from it. */
  readonly runnerKey: string;
  readonly mcpUrl: string;
  readonly processes: Map<ServiceName, ChildProcess>;
  /** Starts one service again (after a kill); resolves once it answers /readyz. */
  restart(name: ServiceName): Promise<void>;
  stop(): Promise<void>;
}

const cliPath = fileURLToPath(new URL("../bin/webcodex.js", import.meta.url));

/**
 * How `webcodex up` runs its gateway, the process that reads callers' request bodies. Each body
 * chunk read (up to 64 KiB, one per socket read) is copied into a Buffer that lives until V8
 * collects it. With glibc's defaults those copies come from the process's main heap and, once
 * freed, stay resident behind any small live allocation above them: a flood of multi-MiB
 * requests left 20-40 MiB there for good (V8's own young generation, 32 MiB at most,
 * shrinks again once the flood stops). From 16 KiB up, glibc now maps each allocation on its
 * own and unmaps it when it is freed (a fixed threshold: glibc's own starts at 128 KiB and rises
 * with use); an operator's own setting is kept.
 */
const GATEWAY_MALLOC_ENV: Record<string, string> = { MALLOC_MMAP_THRESHOLD_: process.env["MALLOC_MMAP_THRESHOLD_"] ?? "16384" };

export async function waitForReady(url: string, timeoutMs: number, path = "/readyz"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(1_000) });
      if (res.ok) return;
      last = `${res.status} ${await res.text()}`;
    } catch (error) {
      last = String(error);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url}${path} not ready after ${timeoutMs} ms: ${last}`);
}

export async function startDistributed(o: DistributedOptions): Promise<DistributedStack> {
  const ports = Object.fromEntries(SERVICES.map((s, i) => [s, o.basePort + i])) as Record<ServiceName, number>;
  const url = (s: ServiceName) => `http://127.0.0.1:${ports[s]}`;
  const projectDir = realpathSync(resolve(o.projectDir));
  const common = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: process.env["HOME"] ?? "/tmp",
    WEBCODEX_HOST: "127.0.0.1",
    WEBCODEX_LOG_LEVEL: process.env["WEBCODEX_LOG_LEVEL"] ?? "warn",
    // Each service's stderr is a pipe to this process: they log as this terminal would.
    WEBCODEX_LOG_FORMAT: logFormatFor(process.env, (o.stdio ?? "inherit") === "inherit" && process.stderr.isTTY === true),
    ...o.extraEnv,
  };
  const serviceKey = o.serviceKey ?? randomBytes(32).toString("base64url");
  const runnerKey = randomBytes(32).toString("base64url");
  const envFor = (s: ServiceName): Record<string, string> => {
    const base = { ...common, WEBCODEX_PORT: String(ports[s]), ...(s === "runner" ? {} : { WEBCODEX_SERVICE_KEY: serviceKey }) };
    switch (s) {
      case "tool-registry":
        return base;
      case "ref-resolver":
      case "audit":
        return s === "ref-resolver"
          ? { ...base, WEBCODEX_POSTGRES_URL: o.postgresUrl, WEBCODEX_REDIS_URL: o.redisUrl }
          : { ...base, WEBCODEX_POSTGRES_URL: o.postgresUrl };
      case "runner-broker":
        return {
          ...base,
          WEBCODEX_POSTGRES_URL: o.postgresUrl,
          WEBCODEX_REDIS_URL: o.redisUrl,
          WEBCODEX_REF_RESOLVER_URL: url("ref-resolver"),
          WEBCODEX_RUNNER_TOKEN: runnerKey,
          WEBCODEX_HEARTBEAT_INTERVAL_MS: String(o.heartbeatIntervalMs ?? 5_000),
          ...(o.workspacesDir ? { WEBCODEX_PROVISIONER: "local-process", WEBCODEX_RUNNER_WORKSPACES_DIR: o.workspacesDir } : {}),
        };
      case "gateway":
        return {
          ...base,
          ...o.gatewayEnv,
          WEBCODEX_TOOL_REGISTRY_URL: url("tool-registry"),
          WEBCODEX_REF_RESOLVER_URL: url("ref-resolver"),
          WEBCODEX_AUDIT_URL: url("audit"),
          WEBCODEX_RUNNER_BROKER_URL: url("runner-broker"),
          WEBCODEX_DEV_CLIENT_ID: o.clientId,
          // /readyz waits for the local project's Runner.
          WEBCODEX_READY_PROJECTS: `agent:${o.clientId}:${projectIdFor(projectDir)}`,
          ...GATEWAY_MALLOC_ENV,
        };
      case "runner":
        return {
          ...base,
          ...o.runnerEnv,
          WEBCODEX_RUNNER_ROOT: projectDir,
          WEBCODEX_RUNNER_BROKER_URL: url("runner-broker"),
          WEBCODEX_RUNNER_CLIENT_ID: o.clientId,
          WEBCODEX_RUNNER_PROJECT_ID: projectIdFor(projectDir),
          // Its own workspace-bound credential, never the key.
          WEBCODEX_RUNNER_TOKEN: runnerCredential(runnerKey, { clientId: o.clientId, projectId: projectIdFor(projectDir) }),
        };
    }
  };
  const processes = new Map<ServiceName, ChildProcess>();
  const start = async (s: ServiceName, initial = false) => {
    // A port another process holds would answer the readiness probe in the service's place
    // (or the service would die on it): said by name before anything starts.
    await refuseHeldPort(s, ports[s]);
    const mode = o.stdio ?? "inherit";
    // stderr is always read (and forwarded unless output is ignored), so a service that dies
    // while starting says why in the error.
    const child = spawn(process.execPath, [o.cli ?? cliPath, s === "runner" ? "runner" : "serve", ...(s === "runner" ? [] : [s])], {
      env: envFor(s),
      stdio: mode === "pipe" ? "pipe" : ["ignore", mode, "pipe"],
    });
    let stderrTail = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      if (mode === "inherit") process.stderr.write(chunk);
      stderrTail = (stderrTail + chunk.toString()).slice(-4_000);
    });
    processes.set(s, child);
    await Promise.race([
      // At first start the gateway is ready only once the Runner (started after it) is routable.
      waitForReady(url(s), o.startTimeoutMs ?? 30_000, s === "runner" || (initial && s === "gateway") ? "/healthz" : "/readyz"),
      new Promise((_, reject) =>
        child.once("exit", (code) => reject(new Error(`${s} exited with ${code} during start${stderrTail ? `:\n${stderrTail.trim()}` : ""}`))),
      ),
    ]);
  };
  const stopOne = (p: ChildProcess) =>
    new Promise<void>((r) => {
      if (p.exitCode !== null || p.signalCode !== null) return r();
      p.once("exit", () => r());
      p.kill("SIGTERM");
      setTimeout(() => p.kill("SIGKILL"), 5_000).unref();
    });
  // The gateway first (it flushes audit records), then the Runner, then the rest together.
  const stop = async () => {
    for (const first of ["gateway", "runner"] as const) {
      const p = processes.get(first);
      if (p) await stopOne(p);
    }
    await Promise.all([...processes.values()].map(stopOne));
  };
  for (const s of SERVICES) await refuseHeldPort(s, ports[s]);
  try {
    for (const s of SERVICES) await start(s, true);
    await waitForReady(url("gateway"), o.startTimeoutMs ?? 30_000, "/readyz");
  } catch (error) {
    await stop();
    throw error;
  }
  return { ports, serviceKey, runnerKey, mcpUrl: `${url("gateway")}/mcp`, processes, restart: start, stop };
}
