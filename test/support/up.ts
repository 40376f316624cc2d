/** `webcodex up` as a user runs it: one command, its own process group, the MCP URL on stdout. */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { chmodSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { findFreeBasePort, SERVICES } from "@webcodex/cli";
import { backingServices, createTestDatabase, redisKeyPrefix } from "./backing-services.js";
import { cliPath, createProjectDir, tempDir } from "./processes.js";

export interface UpStack {
  child: ChildProcess;
  mcpUrl: string;
  output: () => string;
}

/** Starts `webcodex up <args>` with exactly `env`; resolves once it prints its MCP URL. */
export function startUp(env: Record<string, string>, args: string[], timeoutMs = 180_000): Promise<UpStack> {
  const child = spawn(process.execPath, [cliPath, "up", ...args], { env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`webcodex up did not start in ${timeoutMs} ms\n${out}`)), timeoutMs);
    child.stdout?.on("data", () => {
      const m = /MCP URL: (\S+)/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve({ child, mcpUrl: m[1], output: () => out });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`webcodex up exited with ${code}\n${out}`));
    });
  });
}

/** SIGTERM (the stack stops its services and Runners), then SIGKILL of the group after `graceMs`. */
export async function stopUp(child: ChildProcess, graceMs = 20_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => void killUp(child), graceMs);
  await exited;
  clearTimeout(timer);
}

/** SIGKILL of the whole stack: every process in the command's process group at once. */
export function killUp(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    try {
      process.kill(-(child.pid as number), "SIGKILL");
    } catch {
      resolve();
    }
  });
}

/** A `webcodex up` as an operator starts it on a server (its default data dir), and what a test needs to reach into it. */
export interface RootUp {
  up: UpStack;
  /** The 0700 HOME it runs with; its default data dir is ~/.webcodex/up. */
  home: string;
  /** Where created projects' workspaces live (`<tenant>/<project>` under it). */
  workspaces: string;
  tokensFile: string;
  /** Its database's URL (the database is its own). */
  databaseUrl: string;
  /** Stops the stack and drops its database. */
  close(): Promise<void>;
}

/**
 * Starts `webcodex up` with up's default data dir under a fresh 0700 HOME, a database of its
 * own, Redis under a key prefix of its own, and the principals in `tokens` (a tokens file
 * entry each: token, client_id, subject, admission_profile?); the --project (`projectDir`, or a
 * new one) belongs to the first token's tenant. `env` adds to (or overrides) the environment it
 * is given; as a function it is called with the HOME first (to place the operator's files there).
 */
export async function startRootUp(
  tokens: ReadonlyArray<Record<string, unknown>>,
  env: Record<string, string> | ((home: string) => Record<string, string>) = {},
  projectDir?: string,
): Promise<RootUp> {
  const services = await backingServices();
  const db = await createTestDatabase();
  const home = tempDir("wcx-up-home-");
  chmodSync(home, 0o700);
  const tokensFile = join(home, "tokens.json");
  writeFileSync(tokensFile, JSON.stringify({ tokens }), { mode: 0o600 });
  const project = projectDir ?? createProjectDir({ "README.md": "# up\n" }, { name: "rootup" });
  let up: UpStack;
  try {
    up = await startUp(
      {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        HOME: home,
        WEBCODEX_POSTGRES_URL: db.url,
        WEBCODEX_REDIS_URL: services.redisUrl,
        WEBCODEX_REDIS_KEY_PREFIX: redisKeyPrefix(),
        WEBCODEX_DEV_TOKENS_FILE: tokensFile,
        ...(typeof env === "function" ? env(home) : env),
      },
      ["--project", project, "--port", String(await findFreeBasePort(SERVICES.length))],
    );
  } catch (error) {
    await db.drop();
    throw error;
  }
  return {
    up,
    home,
    workspaces: join(home, ".webcodex", "up", "workspaces"),
    tokensFile,
    databaseUrl: db.url,
    async close() {
      await stopUp(up.child);
      await db.drop();
    },
  };
}

/** The pid of one service process of a `webcodex up` (e.g. "gateway"): its child running `serve <service>`. */
export function upServicePid(up: UpStack, service: string): number {
  const parent = up.child.pid;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(") ") + 2).split(" ")[1]);
      if (ppid === parent && readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(`\0serve\0${service}\0`)) return Number(entry);
    } catch {
      // Gone meanwhile.
    }
  }
  throw new Error(`no ${service} process under webcodex up (pid ${parent})`);
}
