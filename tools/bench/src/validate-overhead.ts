/**
 * validate_overhead: project_validate on the TypeScript fixture through the Runner (its
 * handler, executor, spawn host, validation process and parsers) against running the same
 * three validator commands directly, one after another, in the same run.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createLogger } from "@webcodex/platform";
import { createRunner } from "@webcodex/runner";
import { writeFixture } from "@webcodex/runner/validation-fixtures";
import { benchDir } from "./project.js";
import { median, round } from "./stats.js";
import type { BenchResult } from "./stats.js";

function run(argv: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0] as string, argv.slice(1), { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.on("data", () => undefined);
    child.stderr.on("data", () => undefined);
    child.on("error", reject);
    child.on("close", () => resolve());
  });
}

export async function benchValidateOverhead(rounds = 3): Promise<BenchResult> {
  const root = benchDir("wcx-bench-validate-");
  await writeFixture("node", root, true);
  const bin = join(root, "node_modules", ".bin");
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${bin}:${process.env["PATH"] ?? ""}` };
  delete env["NODE_TEST_CONTEXT"];
  const direct = [
    [join(bin, "tsc"), "--noEmit", "--pretty", "false", "-p", "tsconfig.json"],
    [join(bin, "eslint"), "--format", "json", "."],
    ["sh", "-c", "node --test --test-reporter=tap test/"],
  ];
  const runner = createRunner({ root, logger: createLogger({ service: "bench", level: "silent" }) });
  const validate = runner.handlers.tools["project_validate"];
  if (!validate) throw new Error("this Runner does not implement project_validate");
  const base: number[] = [];
  const tool: number[] = [];
  try {
    // One warm-up of each, then alternating rounds.
    for (let i = 0; i <= rounds; i++) {
      let t = performance.now();
      for (const argv of direct) await run(argv, root, env);
      if (i > 0) base.push(performance.now() - t);
      t = performance.now();
      const r = (await validate({ wait_ms: 30_000, timeout_ms: 120_000 }, new AbortController().signal)) as { status?: string; checks?: unknown[] };
      if (i > 0) tool.push(performance.now() - t);
      if (r.status !== "failed" || r.checks?.length !== 3)
        throw new Error(`project_validate did not give the expected verdict: ${JSON.stringify(r).slice(0, 300)}`);
    }
  } finally {
    await runner.close();
  }
  const b = median(base);
  const v = median(tool);
  return {
    name: "validate_overhead",
    metrics: { direct_commands_ms: round(b, 0), project_validate_ms: round(v, 0), ratio: round(v / b, 2) },
    notes:
      "TS fixture (tsc, ESLint JSON, node:test TAP) through the Runner's project_validate vs the same commands run directly one after another; median of rounds (target ratio <= 1.2)",
  };
}
