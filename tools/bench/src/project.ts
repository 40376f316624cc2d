import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";

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
