/**
 * The six WebCodex images run as the chart runs them, on a Docker engine: uid 10001, read-only
 * root filesystem, every capability dropped, no privilege escalation, and only the chart's
 * writable mounts (/tmp everywhere, the audit spool on the gateway, /workspace on the Runner),
 * with Postgres and Redis from the test images (tools/scripts/test-images.sh) on a user-defined
 * network. The engine is the one the docker CLI reaches (DOCKER_HOST or the default socket).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createConnection } from "node:net";
import pg from "pg";
import { runnerCredential } from "@webcodex/runner-broker";
import { repoRoot } from "./processes.js";

export interface DockerEngine {
  version: string;
  /** DOCKER_HOST, or the CLI's default. */
  host: string;
}

/** The engine the docker CLI reaches, or why there is none. */
export function dockerEngine(): DockerEngine | { missing: string } {
  const res = spawnSync("docker", ["version", "--format", "{{.Server.Version}}"], { encoding: "utf8", timeout: 15_000 });
  if (res.error) return { missing: `no docker CLI (${res.error.message})` };
  if (res.status !== 0) return { missing: (res.stderr || res.stdout).trim().split("\n")[0] ?? `docker version exited ${res.status}` };
  return { version: res.stdout.trim(), host: process.env["DOCKER_HOST"] ?? "the default socket" };
}

/** Runs the docker CLI; throws with its stderr. */
export function docker(args: string[], options: { input?: Buffer | string; timeoutMs?: number } = {}): string {
  try {
    return execFileSync("docker", args, {
      encoding: "utf8",
      input: options.input,
      timeout: options.timeoutMs ?? 120_000,
      stdio: ["pipe", "pipe", "pipe"],
      maxBuffer: 64 * 1024 * 1024,
    }).trim();
  } catch (error) {
    const e = error as { stderr?: string; message: string };
    throw new Error(`docker ${args.slice(0, 3).join(" ")} ...: ${(e.stderr ?? "").trim() || e.message}`);
  }
}

export const SERVICE_IMAGES = ["gateway", "tool-registry", "ref-resolver", "audit", "runner-broker", "runner"] as const;
export type ServiceImage = (typeof SERVICE_IMAGES)[number];

/** The tag images.sh gives by default: the chart's appVersion and the commit. */
export function imageTag(): string {
  if (process.env["WEBCODEX_IMAGE_TAG"]) return process.env["WEBCODEX_IMAGE_TAG"];
  const app = /^appVersion: *"?([^"\n]*)"?$/m.exec(readFileSync(join(repoRoot, "charts/webcodex/Chart.yaml"), "utf8"))?.[1] ?? "dev";
  const sha = spawnSync("git", ["-C", repoRoot, "rev-parse", "--short=12", "HEAD"], { encoding: "utf8" }).stdout.trim();
  return sha ? `${app}-${sha}` : app;
}

export function imageRef(service: ServiceImage): string {
  return `${(process.env["WEBCODEX_IMAGE_REPO"] ?? "webcodex").replace(/\/$/, "")}/${service}:${imageTag()}`;
}

const present = (image: string) => spawnSync("docker", ["image", "inspect", image], { stdio: "ignore" }).status === 0;

/**
 * Builds (make images) whichever of the six images of this commit are missing; returns the
 * seconds it took (0 when all were there).
 */
export function ensureServiceImages(): number {
  const missing = SERVICE_IMAGES.filter((s) => !present(imageRef(s)));
  if (missing.length === 0) return 0;
  const started = Date.now();
  const res = spawnSync("bash", [join(repoRoot, "tools/chart/images.sh"), ...missing], { encoding: "utf8", timeout: 20 * 60_000, cwd: repoRoot });
  if (res.status !== 0) throw new Error(`images.sh ${missing.join(" ")} failed:\n${(res.stdout + res.stderr).slice(-3_000)}`);
  return Math.round((Date.now() - started) / 1000);
}

/** Postgres and Redis test images (built from Debian packages when absent). */
export function ensureTestImages(): { postgres: string; redis: string } {
  const res = spawnSync("bash", [join(repoRoot, "tools/scripts/test-images.sh")], { encoding: "utf8", timeout: 10 * 60_000 });
  if (res.status !== 0) throw new Error(`test-images.sh failed:\n${res.stderr.slice(-3_000)}`);
  return {
    postgres: process.env["WEBCODEX_TEST_POSTGRES_IMAGE"] ?? "webcodex-test/postgres:15-bookworm",
    redis: process.env["WEBCODEX_TEST_REDIS_IMAGE"] ?? "webcodex-test/redis:7-bookworm",
  };
}

/** The container ports the chart's values give each service. */
export const CHART_PORTS: Record<ServiceImage, number> = {
  gateway: 8080,
  "tool-registry": 8081,
  "ref-resolver": 8082,
  audit: 8083,
  "runner-broker": 8084,
  runner: 8085,
};
const REGISTRATION_PORT = 8094;

/** The chart's container security context, as `docker run` flags. */
export const CHART_SECURITY = ["--user", "10001:10001", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"];

/** The chart's writable mounts of one service (emptyDirs as tmpfs; the Runner's PVC as a volume). */
export function chartMounts(service: ServiceImage, workspaceVolume?: string): string[] {
  const mounts = ["--tmpfs", "/tmp:rw,size=256m,mode=1777"];
  if (service === "gateway") mounts.push("--tmpfs", "/var/spool/webcodex:rw,size=64m,uid=10001,gid=10001,mode=0700");
  if (service === "runner") mounts.push("--mount", `type=volume,source=${workspaceVolume ?? "missing"},target=/workspace`);
  return mounts;
}

/** The published host port of a container port. */
export function publishedPort(container: string, port: number): number {
  const out = docker(["port", container, String(port)]);
  const m = /:(\d+)\s*$/m.exec(out.split("\n")[0] ?? "");
  if (!m) throw new Error(`container ${container} publishes no port ${port}: ${out}`);
  return Number(m[1]);
}

async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs: number, container?: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  const logs = container ? spawnSync("docker", ["logs", "--tail", "30", container], { encoding: "utf8" }) : undefined;
  throw new Error(`${what} not ready after ${timeoutMs} ms${logs ? `; its logs:\n${logs.stdout}${logs.stderr}` : ""}`);
}

const httpOk = (url: string) => async () => (await fetch(url, { signal: AbortSignal.timeout(1_000) })).ok;

const redisPing = (port: number) => () =>
  new Promise<boolean>((done) => {
    const s = createConnection(port, "127.0.0.1");
    s.setTimeout(1_000);
    s.on("connect", () => s.write("PING\r\n"));
    s.on("data", (d) => {
      done(String(d).startsWith("+PONG"));
      s.destroy();
    });
    s.on("error", () => done(false));
    s.on("timeout", () => {
      done(false);
      s.destroy();
    });
  });

async function postgresUp(url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
  try {
    await c.connect();
    await c.query("SELECT 1");
    return true;
  } finally {
    await c.end().catch(() => undefined);
  }
}

export interface ContainerStackOptions {
  /** The project the Runner serves: a directory copied into its /workspace volume. */
  projectDir: string;
  /** The Runner's project id (the Project the gateway lists). */
  projectId: string;
  devToken: string;
  /** More env for every service. */
  extraEnv?: Record<string, string>;
}

export interface ContainerStack {
  readonly network: string;
  /** Container name of each service, and of "postgres" and "redis". */
  readonly containers: Record<ServiceImage | "postgres" | "redis", string>;
  /** Host URL of each service's published port. */
  readonly urls: Record<ServiceImage, string>;
  readonly mcpUrl: string;
  /** The platform database, from the host (read again each time: a restarted container may publish another port). */
  readonly postgresUrl: string;
  /** Milliseconds from `docker run` to the service's /healthz answering 200. */
  readonly startMs: Record<ServiceImage, number>;
  readonly serviceKey: string;
  stop(): Promise<void>;
}

/**
 * Starts Postgres and Redis, runs `webcodex migrate` as the chart's Job does, then the five
 * services and one Runner, each with the chart's security context; resolves once the gateway
 * answers /readyz (its Runner is routable).
 */
export async function startContainerStack(o: ContainerStackOptions): Promise<ContainerStack> {
  const id = randomBytes(4).toString("hex");
  const network = `wcx-${id}`;
  const name = (s: string) => `wcx-${id}-${s}`;
  const volume = `wcx-${id}-workspace`;
  const created: string[] = [];
  const stop = async () => {
    spawnSync("docker", ["rm", "-f", "-v", ...created], { stdio: "ignore", timeout: 60_000 });
    spawnSync("docker", ["volume", "rm", "-f", volume], { stdio: "ignore" });
    spawnSync("docker", ["network", "rm", network], { stdio: "ignore" });
  };
  try {
    const images = ensureTestImages();
    docker(["network", "create", "--label", "webcodex-test=1", network]);
    const run = (container: string, args: string[]) => {
      created.push(container);
      docker(["run", "-d", "--name", container, "--label", "webcodex-test=1", "--network", network, ...args]);
    };
    run(name("postgres"), ["--network-alias", "postgres", "-p", "127.0.0.1::5432", "-e", "POSTGRES_DB=webcodex", images.postgres]);
    run(name("redis"), ["--network-alias", "redis", "-p", "127.0.0.1::6379", images.redis]);
    const postgresUrl = `postgres://postgres@127.0.0.1:${publishedPort(name("postgres"), 5432)}/webcodex`;
    await waitFor("postgres", () => postgresUp(postgresUrl), 60_000, name("postgres"));
    await waitFor("redis", redisPing(publishedPort(name("redis"), 6379)), 30_000, name("redis"));

    // The workspace volume (the Runner's PVC), filled with the project as uid 10001.
    docker(["volume", "create", "--label", "webcodex-test=1", volume]);
    const tar = execFileSync("tar", ["-c", "-C", o.projectDir, "."], { maxBuffer: 256 * 1024 * 1024 });
    docker(
      [
        "run",
        "--rm",
        "-i",
        ...CHART_SECURITY,
        "--mount",
        `type=volume,source=${volume},target=/workspace`,
        imageRef("runner"),
        "tar",
        "-x",
        "-C",
        "/workspace",
      ],
      {
        input: tar,
      },
    );

    const internalPg = "postgres://postgres@postgres:5432/webcodex";
    const internalRedis = "redis://redis:6379";
    const serviceKey = randomBytes(32).toString("base64url");
    const runnerKey = randomBytes(32).toString("base64url");
    const common = { WEBCODEX_HOST: "0.0.0.0", WEBCODEX_LOG_LEVEL: "warn", ...o.extraEnv };
    const svcUrl = (s: ServiceImage, port = CHART_PORTS[s]) => `http://${s}:${port}`;
    const envFor = (s: ServiceImage): Record<string, string> => {
      const base = { ...common, WEBCODEX_PORT: String(CHART_PORTS[s]), ...(s === "runner" ? {} : { WEBCODEX_SERVICE_KEY: serviceKey }) };
      switch (s) {
        case "tool-registry":
          return base;
        case "ref-resolver":
          return { ...base, WEBCODEX_POSTGRES_URL: internalPg, WEBCODEX_REDIS_URL: internalRedis };
        case "audit":
          return { ...base, WEBCODEX_POSTGRES_URL: internalPg };
        case "runner-broker":
          return {
            ...base,
            WEBCODEX_POSTGRES_URL: internalPg,
            WEBCODEX_REDIS_URL: internalRedis,
            WEBCODEX_REF_RESOLVER_URL: svcUrl("ref-resolver"),
            WEBCODEX_RUNNER_TOKEN: runnerKey,
            WEBCODEX_REGISTRATION_PORT: String(REGISTRATION_PORT),
            WEBCODEX_HEARTBEAT_INTERVAL_MS: "1000",
          };
        case "gateway":
          return {
            ...base,
            WEBCODEX_TOOL_REGISTRY_URL: svcUrl("tool-registry"),
            WEBCODEX_REF_RESOLVER_URL: svcUrl("ref-resolver"),
            WEBCODEX_AUDIT_URL: svcUrl("audit"),
            WEBCODEX_RUNNER_BROKER_URL: svcUrl("runner-broker"),
            WEBCODEX_AUDIT_SPOOL_DIR: "/var/spool/webcodex",
            WEBCODEX_MCP_SESSION_KEY: randomBytes(32).toString("base64url"),
            WEBCODEX_DEV_TOKEN: o.devToken,
            WEBCODEX_DEV_CLIENT_ID: "local",
            WEBCODEX_READY_PROJECTS: `agent:local:${o.projectId}`,
          };
        case "runner":
          return {
            ...base,
            HOME: "/tmp",
            WEBCODEX_RUNNER_ROOT: "/workspace",
            WEBCODEX_RUNNER_STATE_DIR: "/tmp/webcodex-runner-state",
            WEBCODEX_RUNNER_BROKER_URL: svcUrl("runner-broker", REGISTRATION_PORT),
            WEBCODEX_RUNNER_ADVERTISE_URL: svcUrl("runner"),
            WEBCODEX_RUNNER_CLIENT_ID: "local",
            WEBCODEX_RUNNER_PROJECT_ID: o.projectId,
            WEBCODEX_RUNNER_TOKEN: runnerCredential(runnerKey, { clientId: "local", projectId: o.projectId }),
          };
      }
    };
    const envArgs = (env: Record<string, string>) => Object.entries(env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);

    // The chart's migrations Job, then the Deployments.
    docker([
      "run",
      "--rm",
      "--network",
      network,
      ...CHART_SECURITY,
      ...chartMounts("audit"),
      "-e",
      `WEBCODEX_POSTGRES_URL=${internalPg}`,
      imageRef("gateway"),
      "node",
      "tools/cli/bin/webcodex.js",
      "migrate",
    ]);
    const urls = {} as Record<ServiceImage, string>;
    const startMs = {} as Record<ServiceImage, number>;
    const start = async (s: ServiceImage) => {
      const began = Date.now();
      run(name(s), [
        "--network-alias",
        s,
        "-p",
        `127.0.0.1::${CHART_PORTS[s]}`,
        ...CHART_SECURITY,
        ...chartMounts(s, volume),
        ...envArgs(envFor(s)),
        imageRef(s),
      ]);
      urls[s] = `http://127.0.0.1:${publishedPort(name(s), CHART_PORTS[s])}`;
      await waitFor(`${s} /healthz`, httpOk(`${urls[s]}/healthz`), 60_000, name(s));
      startMs[s] = Date.now() - began;
    };
    await Promise.all((["tool-registry", "ref-resolver", "audit", "runner-broker"] as const).map(start));
    await start("gateway");
    await start("runner");
    await waitFor("gateway /readyz (its Runner routable)", httpOk(`${urls.gateway}/readyz`), 60_000, name("gateway"));
    const containers = Object.fromEntries([...SERVICE_IMAGES, "postgres", "redis"].map((s) => [s, name(s)])) as ContainerStack["containers"];
    return {
      network,
      containers,
      urls,
      mcpUrl: `${urls.gateway}/mcp`,
      get postgresUrl() {
        return `postgres://postgres@127.0.0.1:${publishedPort(name("postgres"), 5432)}/webcodex`;
      },
      startMs,
      serviceKey,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The engine's view of one container's security settings (what `docker inspect` reports). */
export function securityOf(container: string): {
  user: string;
  readOnly: boolean;
  capDrop: string[];
  capAdd: string[];
  securityOpt: string[];
  privileged: boolean;
} {
  const [info] = JSON.parse(docker(["inspect", container])) as Array<{
    Config: { User: string };
    HostConfig: { ReadonlyRootfs: boolean; CapDrop: string[] | null; CapAdd: string[] | null; SecurityOpt: string[] | null; Privileged: boolean };
  }>;
  if (!info) throw new Error(`no container ${container}`);
  return {
    user: info.Config.User,
    readOnly: info.HostConfig.ReadonlyRootfs,
    capDrop: info.HostConfig.CapDrop ?? [],
    capAdd: info.HostConfig.CapAdd ?? [],
    securityOpt: info.HostConfig.SecurityOpt ?? [],
    privileged: info.HostConfig.Privileged,
  };
}
