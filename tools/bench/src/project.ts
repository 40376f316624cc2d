import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";

export const cliPathForBench = fileURLToPath(new URL("../../cli/bin/webcodex.js", import.meta.url));

const benchDirs: string[] = [];
process.once("exit", () => {
  for (const dir of benchDirs) rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
});

/** A fresh temp dir, removed when the benchmark process exits. */
export function benchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  benchDirs.push(dir);
  return dir;
}

/** A project with one ~2 KB TypeScript file that every tool-call benchmark reads. */
export function createBenchProject(): string {
  const root = join(benchDir("wcx-bench-"), "bench");
  mkdirSync(join(root, "src"), { recursive: true });
  const lines = Array.from({ length: 60 }, (_, i) => `export const value${i} = ${i}; // line ${i}`);
  writeFileSync(join(root, "src/module.ts"), lines.join("\n") + "\n");
  return root;
}

/** The environment a benchmarked stdio server gets: PATH, a fresh HOME, warnings only. */
export function stdioEnv(): Record<string, string> {
  return { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: benchDir("wcx-bench-home-"), WEBCODEX_LOG_LEVEL: "warn" };
}

/**
 * The settings every benchmarked six-process stack shares: its own Redis key prefix, warnings
 * only, output dropped; with `token`, that dev token and no rate limit (a bench makes thousands
 * of calls in a row as one principal).
 */
export function benchStackOptions(token?: string): { clientId: string; gatewayEnv: Record<string, string>; extraEnv: Record<string, string>; stdio: "ignore" } {
  return {
    clientId: "local",
    gatewayEnv: token ? { WEBCODEX_DEV_TOKEN: token, WEBCODEX_RATE_LIMIT_PER_MINUTE: "0" } : {},
    extraEnv: { WEBCODEX_REDIS_KEY_PREFIX: `wcx-bench:${randomBytes(4).toString("hex")}:`, WEBCODEX_LOG_LEVEL: "warn" },
    stdio: "ignore",
  };
}
