/**
 * sandbox: what the Job sandbox costs a short program. `run_shell true` through two `webcodex
 * dev` servers started the same way on copies of one project, one with the sandbox (the
 * default wherever it can be made) and one with it turned off (WEBCODEX_RUNNER_SANDBOX=off,
 * the baseline), measured side by side in alternating rounds of the same run.
 */
import { randomBytes } from "node:crypto";
import { detectSandbox } from "@webcodex/runner";
import { benchDir, cliPathForBench, createBenchProject } from "./project.js";
import { stopChild, startChild } from "./stats.js";
import type { BenchResult } from "./stats.js";
import { connect, pairedLatency, projectRefOf, ratioMetrics } from "./tool-call.js";

async function startDev(sandbox: "auto" | "off"): Promise<{ url: string; token: string; stop: () => Promise<void> }> {
  const token = randomBytes(16).toString("hex");
  const dev = await startChild(
    process.execPath,
    [cliPathForBench, "dev", "--project", createBenchProject(), "--port", "0", "--data-dir", benchDir("wcx-bench-sandbox-")],
    /MCP URL: (\S+)/,
    { WEBCODEX_DEV_TOKEN: token, WEBCODEX_LOG_LEVEL: "error", WEBCODEX_RUNNER_SANDBOX: sandbox, WEBCODEX_RATE_LIMIT_PER_MINUTE: "0" },
  );
  return { url: dev.match[1] as string, token, stop: () => stopChild(dev.child) };
}

export async function benchSandboxCost(options: { rounds?: number; callsPerRound?: number } = {}): Promise<BenchResult> {
  const support = detectSandbox();
  if (!support.available) {
    return { name: "run_shell_true_sandbox", metrics: {}, notes: `not measured: no sandbox can be made here (${support.problem ?? "unknown"})` };
  }
  const sandboxed = await startDev("auto");
  let bare: Awaited<ReturnType<typeof startDev>> | undefined;
  try {
    bare = await startDev("off");
    const [s, b] = await Promise.all([connect(sandboxed.url, sandboxed.token), connect(bare.url, bare.token)]);
    try {
      const args = async (client: typeof s) => ({ project: await projectRefOf(client), command: "true", wait_ms: 30_000 });
      const m = await pairedLatency(
        { client: b, name: "run_shell", args: await args(b) },
        { client: s, name: "run_shell", args: await args(s) },
        { rounds: options.rounds ?? 12, callsPerRound: options.callsPerRound ?? 20, warmup: 30 },
      );
      return {
        name: "run_shell_true_sandbox",
        metrics: { unsandboxed_p50_ms: m.a.p50, sandboxed_p50_ms: m.b.p50, sandboxed_p99_ms: m.b.p99, ...ratioMetrics(m) },
        notes: `run_shell \`true\` in the bubblewrap sandbox (${support.mode ?? "?"} mode) vs the same server with WEBCODEX_RUNNER_SANDBOX=off (target ratio <= 1.5)`,
      };
    } finally {
      await Promise.all([s.close(), b.close()]);
    }
  } finally {
    await Promise.all([sandboxed.stop(), bare?.stop()]);
  }
}
