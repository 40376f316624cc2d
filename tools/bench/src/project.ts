import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";

export const cliPathForBench = fileURLToPath(new URL("../../cli/bin/webcodex.js", import.meta.url));

/** A project with one ~2 KB TypeScript file that every tool-call benchmark reads. */
export function createBenchProject(): string {
  const root = join(mkdtempSync(join(tmpdir(), "wcx-bench-")), "bench");
  mkdirSync(join(root, "src"), { recursive: true });
  const lines = Array.from({ length: 60 }, (_, i) => `export const value${i} = ${i}; // line ${i}`);
  writeFileSync(join(root, "src/module.ts"), lines.join("\n") + "\n");
  return root;
}
