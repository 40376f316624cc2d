/**
 * `make bench`: every figure is a ratio against a baseline measured in the same run.
 * Results are printed as a table and written to bench-results/latest.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execFileSync, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { findFreeBasePort, startDistributed } from "@webcodex/cli";
import { benchDir, benchStackOptions, cliPathForBench, createBenchProject, stdioEnv } from "./project.js";
import {
  baselineServerPath,
  connect,
  connectStdio,
  filesystemServerPath,
  latency,
  pairedLatency,
  projectRefOf,
  ratioMetrics,
  throughput,
} from "./tool-call.js";
import type { Probe } from "./tool-call.js";
import { benchBulkEdit, benchSearch } from "./workspace-benches.js";
import { benchAuditIngest } from "./audit-ingest.js";
import { benchRefResolution } from "./ref-resolution.js";
import { benchValidateOverhead } from "./validate-overhead.js";
import { benchAgentEvents } from "./agent-events.js";
import { benchEconomy } from "./economy.js";
import { benchMcpGateway } from "./mcp-gateway.js";
import { benchCodeMode } from "./code-mode.js";
import { benchFleet } from "./fleet.js";
import { benchProvision } from "./provision.js";
import { benchProvisionKube } from "./provision-kube.js";
import { benchSandboxCost } from "./sandbox-cost.js";
import { withBenchDatabase } from "./bench-database.js";
import { cpuMicros, median, peakRssMiB, resultTable, round, rssMiB, startChild, stopChild } from "./stats.js";
import type { BenchResult } from "./stats.js";

/** The parts `make bench` runs, in order; any of them can be named on the command line. */
const PARTS = [
  "tool_calls",
  "tool_call_distributed",
  "tool_call_stdio",
  "spawn",
  "sandbox",
  "edit",
  "search",
  "audit",
  "ref_resolution",
  "validate_overhead",
  "agent_events",
  "economy",
  "mcp_gateway",
  "code_mode",
  "fleet",
  "provision",
] as const;
const only = new Set(process.argv.slice(2));
const unknownParts = [...only].filter((name) => !(PARTS as readonly string[]).includes(name));
if (unknownParts.length > 0) {
  process.stderr.write(`unknown bench part(s): ${unknownParts.join(", ")}; known: ${PARTS.join(", ")}\n`);
  process.exit(2);
}
const want = (name: (typeof PARTS)[number]) => only.size === 0 || only.has(name);
const postgresAdminUrl = process.env["WEBCODEX_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/test";
const redisUrl = process.env["WEBCODEX_TEST_REDIS_URL"] ?? "redis://127.0.0.1:6379";
/** Measured calls per side of each latency comparison, in 12 alternating rounds (after 1,000 warm-up calls each). */
const CALLS = Number(process.env["WEBCODEX_BENCH_CALLS"] ?? 1_200);
const ROUNDS = 12;
const paired = (a: Probe, b: Probe) => pairedLatency(a, b, { rounds: ROUNDS, callsPerRound: Math.max(1, Math.round(CALLS / ROUNDS)) });
/** Admin URL for the ref-resolution bench (it creates and drops its own database there). */
const benchPostgresUrl = process.env["WEBCODEX_BENCH_POSTGRES_URL"] ?? postgresAdminUrl;

const withDatabase = <T>(fn: (url: string) => Promise<T>): Promise<T> => withBenchDatabase(postgresAdminUrl, "wcx_bench", fn);

async function spawnLatency(runs: number): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < runs + 20; i++) {
    const t = performance.now();
    await new Promise<void>((resolve, reject) => {
      const c = spawn("true", [], { stdio: "ignore" });
      c.on("error", reject);
      c.on("close", () => resolve());
    });
    if (i >= 20) samples.push(performance.now() - t);
  }
  return median(samples);
}

/** Spawning `true` from an 800 MB process: directly (fork copies it) vs through the Runner's spawn host. */
function benchSpawn(): BenchResult {
  const script = fileURLToPath(new URL("./spawn-from-big.js", import.meta.url));
  const r = JSON.parse(execFileSync(process.execPath, [script], { encoding: "utf8" })) as { rss_mib: number; direct_p50_ms: number; host_p50_ms: number };
  return {
    name: "spawn_true_800mb",
    metrics: { rss_mib: r.rss_mib, direct_p50_ms: r.direct_p50_ms, spawn_host_p50_ms: r.host_p50_ms, ratio_p50: round(r.host_p50_ms / r.direct_p50_ms, 2) },
    notes: "spawn `true` from a process with 800 MB touched: through the Runner's spawn host vs directly",
  };
}

async function benchToolCalls(results: BenchResult[]): Promise<void> {
  const projectDir = createBenchProject();
  const token = `bench-${randomBytes(12).toString("hex")}`;
  const file = "src/module.ts";
  if (want("tool_calls")) await benchEmbeddedCalls(results, projectDir, token, file);
  if (want("tool_call_distributed")) await benchDistributedCall(results, projectDir, token, file);
  if (want("tool_call_stdio")) await benchStdioCall(results, projectDir, file);
}

/**
 * read_files over `webcodex stdio` against the reference MCP filesystem server
 * (@modelcontextprotocol/server-filesystem, pinned) over stdio, same client, file and run.
 */
async function benchStdioCall(results: BenchResult[], projectDir: string, file: string): Promise<void> {
  const env = stdioEnv();
  const reference = await connectStdio(process.execPath, [filesystemServerPath, projectDir], env);
  const ours = await connectStdio(process.execPath, [cliPathForBench, "stdio", "--project", projectDir, "--data-dir", benchDir("wcx-bench-stdio-")], env);
  try {
    const project = await projectRefOf(ours);
    const m = await paired(
      { client: reference, name: "read_text_file", args: { path: join(projectDir, file) } },
      { client: ours, name: "read_files", args: { project, files: [{ path: file }] } },
    );
    results.push({
      name: "tool_call_stdio",
      metrics: {
        reference_p50_ms: m.a.p50,
        reference_p99_ms: m.a.p99,
        stdio_p50_ms: m.b.p50,
        stdio_p99_ms: m.b.p99,
        ...ratioMetrics(m),
      },
      notes:
        "read_files over webcodex stdio vs read_text_file on @modelcontextprotocol/server-filesystem over stdio, same SDK client and file (target ratio <= 1.5)",
    });
  } finally {
    await reference.close();
    await ours.close();
  }
}

/** read_files through `webcodex dev` against the bare SDK server; tools/list size; run_shell; throughput; memory. */
async function benchEmbeddedCalls(results: BenchResult[], projectDir: string, token: string, file: string): Promise<void> {
  const baseline = await startChild(process.execPath, [baselineServerPath, projectDir, "0"], /LISTENING (\d+)/);
  const baselineUrl = `http://127.0.0.1:${baseline.match[1]}/mcp`;
  const dev = await startChild(
    process.execPath,
    [cliPathForBench, "dev", "--project", projectDir, "--port", "0", "--data-dir", benchDir("wcx-bench-data-")],
    /MCP URL: (\S+)/,
    { WEBCODEX_DEV_TOKEN: token, WEBCODEX_LOG_LEVEL: "warn" },
  );
  const devUrl = dev.match[1] as string;
  try {
    // Idle: started, nothing called yet, 10 s after it printed its URL.
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    const idleRss = rssMiB(dev.child.pid as number);
    const idleBaselineRss = rssMiB(baseline.child.pid as number);
    const bare = await connect(baselineUrl);
    const ours = await connect(devUrl, token);
    const project = await projectRefOf(ours);
    const args = { project, files: [{ path: file }] };
    const m = await paired({ client: bare, name: "read_file", args: { path: file } }, { client: ours, name: "read_files", args });
    results.push({
      name: "tool_call_embedded",
      metrics: {
        baseline_p50_ms: m.a.p50,
        baseline_p99_ms: m.a.p99,
        embedded_p50_ms: m.b.p50,
        embedded_p99_ms: m.b.p99,
        ...ratioMetrics(m),
      },
      notes: "same SDK client and file; baseline = bare SDK Streamable HTTP server rebuilt per request reading the file itself (target ratio <= 1)",
    });

    const list = await ours.listTools();
    results.push({
      name: "tools_list_direct",
      metrics: { bytes: Buffer.byteLength(JSON.stringify(list)), tools: list.tools.length },
      notes: "serialized MCP tools/list result (target <= 8192 bytes, TOOLS_LIST_MAX_BYTES)",
    });

    const spawnP50 = await spawnLatency(100);
    const shell = await latency(ours, "run_shell", { project, command: "true" }, 200);
    results.push({
      name: "run_shell_true",
      metrics: { spawn_true_direct_p50_ms: round(spawnP50), run_shell_p50_ms: shell.p50, ratio_p50: round(shell.p50 / spawnP50, 2) },
      notes: "run_shell through the whole embedded stack vs spawning `true` in Node",
    });
    await bare.close();
    await ours.close();

    const tput = await throughput(devUrl, token, "read_files", args, 16, 4_000);
    const baseTput = await throughput(baselineUrl, "none", "read_file", { path: file }, 16, 4_000);
    results.push({
      name: "throughput_16_callers",
      metrics: {
        embedded_calls_per_s: tput.callsPerSecond,
        embedded_errors: tput.errors,
        baseline_calls_per_s: baseTput.callsPerSecond,
        ratio: round(tput.callsPerSecond / baseTput.callsPerSecond, 2),
      },
      notes: "raw JSON-RPC over keep-alive HTTP, 16 concurrent callers, 4 s (target >= 1000 calls/s)",
    });
    results.push({
      name: "webcodex_dev_memory",
      metrics: {
        idle_rss_mib: round(idleRss, 1),
        idle_baseline_rss_mib: round(idleBaselineRss, 1),
        peak_rss_mib: round(peakRssMiB(dev.child.pid as number), 1),
      },
      notes:
        "VmRSS 10 s after start with no call yet (target <= 160 MiB; baseline: the bare SDK server), and VmHWM of the embedded process after the benchmarks above",
    });
  } finally {
    await stopChild(dev.child);
    await stopChild(baseline.child);
  }
}

/** The sum of a Prometheus counter's samples (all label sets) on a service's /metrics. */
async function counterValue(baseUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}

/**
 * read_files through six processes over HTTP/2 against the bare SDK server, in the same run;
 * then the broker calls a warm read makes (route requests and relayed dispatches, from the
 * gateway's counters), and throughput with 16 callers against the bare server's.
 */
async function benchDistributedCall(results: BenchResult[], projectDir: string, token: string, file: string): Promise<void> {
  await withDatabase(async (postgresUrl) => {
    const stack = await startDistributed({
      basePort: await findFreeBasePort(),
      postgresUrl,
      redisUrl,
      projectDir,
      ...benchStackOptions(token),
      // As the chart deploys it: the gateway's audit spool on local disk.
      gatewayEnv: { ...benchStackOptions(token).gatewayEnv, WEBCODEX_AUDIT_SPOOL_DIR: benchDir("wcx-bench-spool-") },
    });
    const again = await startChild(process.execPath, [baselineServerPath, projectDir, "0"], /LISTENING (\d+)/);
    const baselineUrl = `http://127.0.0.1:${again.match[1]}/mcp`;
    const gatewayUrl = `http://127.0.0.1:${stack.ports.gateway}`;
    try {
      const bare = await connect(baselineUrl);
      const ours = await connect(stack.mcpUrl, token);
      const args = { project: await projectRefOf(ours), files: [{ path: file }] };
      const m = await paired({ client: bare, name: "read_file", args: { path: file } }, { client: ours, name: "read_files", args });
      const brokerCalls = async () =>
        (await counterValue(gatewayUrl, "webcodex_gateway_route_requests_total")) + (await counterValue(gatewayUrl, "webcodex_gateway_relayed_calls_total"));
      const warmCalls = 200;
      const before = await brokerCalls();
      await latency(ours, "read_files", args, warmCalls);
      const perWarmCall = ((await brokerCalls()) - before) / (warmCalls + 50);
      results.push({
        name: "tool_call_distributed",
        metrics: {
          baseline_p50_ms: m.a.p50,
          baseline_p99_ms: m.a.p99,
          distributed_p50_ms: m.b.p50,
          distributed_p99_ms: m.b.p99,
          ...ratioMetrics(m),
          ratio_p99: round(m.b.p99 / m.a.p99, 2),
          broker_calls_per_warm_call: round(perWarmCall, 3),
        },
        notes:
          "six processes over HTTP/2 with Postgres and Redis (target ratio_p50 <= 2, ratio_p99 <= 3); broker calls per warm call = route requests + relayed dispatches over 250 warm calls (target 0)",
      });
      await bare.close();
      await ours.close();

      // CPU per call of each process while it serves the 16 callers (/proc user + system time).
      const services = [...stack.processes].map(([name, child]) => ({ name, pid: child.pid as number }));
      const cpuBefore = services.map((p) => cpuMicros(p.pid));
      const tput = await throughput(stack.mcpUrl, token, "read_files", args, 16, 4_000);
      const cpuPerCall = Object.fromEntries(
        services.map((p, i) => [`${p.name.replace(/-/g, "_")}_cpu_us_per_call`, round((cpuMicros(p.pid) - (cpuBefore[i] as number)) / tput.calls, 0)]),
      );
      const barePid = again.child.pid as number;
      const bareBefore = cpuMicros(barePid);
      const baseTput = await throughput(baselineUrl, "none", "read_file", { path: file }, 16, 4_000);
      const bareCpu = round((cpuMicros(barePid) - bareBefore) / baseTput.calls, 0);
      const stackCpu = Object.values(cpuPerCall).reduce((a, b) => a + b, 0);
      results.push({
        name: "throughput_distributed",
        metrics: {
          distributed_calls_per_s: tput.callsPerSecond,
          distributed_errors: tput.errors,
          baseline_calls_per_s: baseTput.callsPerSecond,
          ratio: round(tput.callsPerSecond / baseTput.callsPerSecond, 2),
          ...cpuPerCall,
          stack_cpu_us_per_call: stackCpu,
          baseline_cpu_us_per_call: bareCpu,
          cpu_ratio: round(stackCpu / bareCpu, 2),
        },
        notes:
          "read_files through the distributed stack vs the bare SDK server, raw JSON-RPC over keep-alive HTTP, 16 concurrent callers, 4 s each (target ratio >= 1); CPU per call of each service process and of the bare server during its run (Postgres, Redis and the load generator not counted)",
      });
    } finally {
      await stopChild(again.child);
      await stack.stop();
    }
  });
}

async function main(): Promise<void> {
  const results: BenchResult[] = [];
  const step = async (name: (typeof PARTS)[number], fn: () => Promise<void>, wanted = want(name)) => {
    if (!wanted) return;
    const t = performance.now();
    process.stdout.write(`bench ${name} ...\n`);
    await fn();
    process.stdout.write(`bench ${name} done in ${round((performance.now() - t) / 1000, 1)} s\n`);
  };
  await step("tool_calls", () => benchToolCalls(results), want("tool_calls") || want("tool_call_distributed") || want("tool_call_stdio"));
  await step("spawn", async () => {
    results.push(benchSpawn());
  });
  await step("sandbox", async () => {
    results.push(await benchSandboxCost());
  });
  await step("edit", async () => {
    results.push(await benchBulkEdit());
  });
  await step("search", async () => {
    results.push(await benchSearch());
  });
  await step("audit", () =>
    withDatabase(async (url) => {
      results.push(await benchAuditIngest(url));
    }),
  );
  await step("ref_resolution", async () => {
    results.push(await benchRefResolution({ postgresUrl: benchPostgresUrl }));
  });
  await step("validate_overhead", async () => {
    results.push(await benchValidateOverhead());
  });
  await step("agent_events", () =>
    withDatabase(async (url) => {
      results.push(await benchAgentEvents({ postgresUrl: url, redisUrl }));
    }),
  );
  await step("economy", async () => {
    results.push(...(await benchEconomy()));
  });
  await step("mcp_gateway", () =>
    withDatabase(async (postgresUrl) => {
      results.push(await benchMcpGateway({ postgresUrl, redisUrl, paired }));
    }),
  );
  await step("code_mode", async () => {
    results.push(...(await benchCodeMode()));
  });
  await step("fleet", async () => {
    results.push(...(await benchFleet()));
  });
  await step("provision", async () => {
    results.push(await benchProvisionKube());
  });
  await step("provision", () =>
    withDatabase((a) =>
      withDatabase(async (b) => {
        results.push(await benchProvision({ postgresUrls: [a, b], redisUrl }));
      }),
    ),
  );

  process.stdout.write(`\n${resultTable("benchmark", results)}`);
  mkdirSync("bench-results", { recursive: true });
  writeFileSync(join("bench-results", "latest.json"), JSON.stringify({ at: new Date().toISOString(), results }, null, 2));
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
