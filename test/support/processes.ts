/** Test helpers that run WebCodex as real processes, the way users and Kubernetes do. */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { tmpdir } from "node:os";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { seedPgliteCluster } from "./pglite-template.js";

/** Live-process probes that tell a zombie from a live process. */
export { pidGone, processGroupAlive } from "@webcodex/runner/process-probes";

export const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
export const cliPath = join(repoRoot, "tools/cli/bin/webcodex.js");
/** The CLI with the gateway's test hooks installed (hooked-cli.test-support.ts): a `cli` for startDevServer and startTestStack. */
export const hookedCliPath = join(repoRoot, "test/dist/support/hooked-cli.test-support.js");

/** Scratch dirs of this test process, removed when it exits (WEBCODEX_KEEP_TEST_DIRS=1 keeps them). */
const scratchDirs: string[] = [];

export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (scratchDirs.length === 0 && process.env["WEBCODEX_KEEP_TEST_DIRS"] !== "1") {
    process.once("exit", () => {
      for (const d of scratchDirs) {
        try {
          rmSync(d, { recursive: true, force: true, maxRetries: 2 });
        } catch {
          // A process still writing there (it is being stopped too); the OS temp dir keeps it.
        }
      }
    });
  }
  scratchDirs.push(dir);
  return dir;
}

/** A temp project directory with the given files, committed to a fresh git repository. */
export function createProjectDir(files: Record<string, string>, options: { git?: boolean; name?: string } = {}): string {
  const root = join(scratchDir("wcx-project-"), options.name ?? "demo");
  mkdirSync(root, { recursive: true });
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  if (options.git !== false) {
    const git = (...args: string[]) => execFileSync("git", ["-c", "user.email=t@example.com", "-c", "user.name=t", ...args], { cwd: root, stdio: "ignore" });
    git("init", "-q", "-b", "main");
    git("add", "-A");
    git("commit", "-qm", "initial");
  }
  return root;
}

export interface DevServer {
  readonly mcpUrl: string;
  readonly baseUrl: string;
  readonly token: string;
  readonly child: ChildProcess;
  /** Everything the server wrote to stdout and stderr so far (its logs). */
  output(): string;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
}

/** Starts `webcodex dev` as a child process and waits until it prints its MCP URL. */
export async function startDevServer(options: {
  projectDir: string;
  dataDir: string;
  token?: string;
  tokensFile?: string;
  env?: Record<string, string>;
  /** The CLI script to run (default: tools/cli/bin/webcodex.js; hookedCliPath installs test hooks). */
  cli?: string;
}): Promise<DevServer> {
  const token = options.token ?? `t-${randomBytes(16).toString("hex")}`;
  const env: Record<string, string> = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: process.env["HOME"] ?? "/tmp",
    WEBCODEX_LOG_LEVEL: "warn",
    ...(options.tokensFile ? { WEBCODEX_DEV_TOKENS_FILE: options.tokensFile } : { WEBCODEX_DEV_TOKEN: token }),
    ...options.env,
  };
  // A fresh data dir gets a copy of a cluster initdb made once (pglite-template.ts).
  await seedPgliteCluster(options.dataDir);
  const child = spawn(process.execPath, [options.cli ?? cliPath, "dev", "--project", options.projectDir, "--port", "0", "--data-dir", options.dataDir], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stderr?.on("data", (d: Buffer) => {
    err += d.toString();
  });
  const mcpUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`webcodex dev did not start in 120 s\n${out}\n${err}`));
    }, 120_000);
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /MCP URL: (\S+)/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`webcodex dev exited with ${code}\n${out}\n${err}`));
    });
  });
  return {
    mcpUrl,
    baseUrl: mcpUrl.replace(/\/mcp$/, ""),
    token,
    child,
    output: () => `${out}\n${err}`,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
        setTimeout(() => child.kill("SIGKILL"), 10_000).unref();
      }),
  };
}

/** SIGKILLs each pid that still runs (the leftovers a test may leave when it fails midway). */
export function killAll(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

export function tempDir(prefix: string): string {
  return scratchDir(prefix);
}

/** What a finished child process printed and its exit code (null when a signal ended it). */
export interface CapturedRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end, capturing its output; SIGKILLed once `timeoutMs` has passed. */
export function runCaptured(
  command: string,
  args: readonly string[],
  options: { cwd: string; env: Record<string, string>; timeoutMs: number },
): Promise<CapturedRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Host pids of the processes whose command line holds `tag`. A Job runs in a pid namespace of
 * its own, so a pid it reports about itself means nothing outside it; the test finds its
 * processes by a tag instead.
 */
export function hostPids(tag: string, argv0?: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      if (cmdline.includes(tag) && (argv0 === undefined || cmdline.startsWith(`${argv0}\0`))) pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

/** A `sleep` argument that tags the process: 97 seconds and a random fraction. */
export const sleepTag = (): string => `97.${String(Math.floor(Math.random() * 1e9)).padStart(9, "1")}`;
