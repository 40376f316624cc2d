/**
 * `make bench-compare BASE=<checkout>`: this build against another built checkout of
 * WebCodex, side by side in one run. The same client calls read_files on both builds over
 * stdio, embedded (`webcodex dev`) and distributed (six processes), in alternating rounds
 * (see `pairedLatency`), and measures embedded throughput in alternation; every figure is
 * this build over the other. A change that should leave performance alone shows ratios
 * whose round spread includes 1.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";
import type { DistributedOptions, DistributedStack } from "@webcodex/cli";
import { benchDir, benchStackOptions, cliPathForBench, createBenchProject, stdioEnv } from "./project.js";
import { connect, connectStdio, pairedLatency, projectRefOf, ratioMetrics, throughput } from "./tool-call.js";
import type { PairedLatency, Probe } from "./tool-call.js";
import { createBenchDatabase } from "./bench-database.js";
import { median, resultTable, round, startChild, stopChild } from "./stats.js";
import type { BenchResult } from "./stats.js";

interface Build {
  label: string;
  cli: string;
  startDistributed(o: DistributedOptions): Promise<DistributedStack>;
  findFreeBasePort(): Promise<number>;
}

const file = "src/module.ts";
const postgresAdminUrl = process.env["WEBCODEX_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/test";
const redisUrl = process.env["WEBCODEX_TEST_REDIS_URL"] ?? "redis://127.0.0.1:6379";

async function loadBuild(label: string, root: string): Promise<Build> {
  const cli = join(root, "tools/cli/bin/webcodex.js");
  const index = join(root, "tools/cli/dist/index.js");
  if (!existsSync(cli) || !existsSync(index)) throw new Error(`${root} is not a built WebCodex checkout (run \`make build\` there): ${index} is missing`);
  const mod = (await import(pathToFileURL(index).href)) as Pick<Build, "startDistributed" | "findFreeBasePort">;
  return { label, cli, startDistributed: mod.startDistributed, findFreeBasePort: mod.findFreeBasePort };
}

const readProbe = async (client: Awaited<ReturnType<typeof connect>>): Promise<Probe> => ({
  client,
  name: "read_files",
  args: { project: await projectRefOf(client), files: [{ path: file }] },
});

function pairedResult(name: string, m: PairedLatency, notes: string): BenchResult {
  return {
    name,
    metrics: {
      base_p50_ms: m.a.p50,
      this_p50_ms: m.b.p50,
      ...ratioMetrics(m),
    },
    notes,
  };
}

async function compareStdio(base: Build, ours: Build, projectDir: string): Promise<BenchResult> {
  const env = stdioEnv();
  const start = (b: Build) => connectStdio(process.execPath, [b.cli, "stdio", "--project", projectDir, "--data-dir", benchDir("wcx-compare-stdio-")], env);
  const [a, b] = [await start(base), await start(ours)];
  try {
    return pairedResult(
      "compare_stdio",
      await pairedLatency(await readProbe(a), await readProbe(b)),
      "read_files over `webcodex stdio`, this build over the base",
    );
  } finally {
    await a.close();
    await b.close();
  }
}

async function compareEmbedded(base: Build, ours: Build, projectDir: string): Promise<BenchResult[]> {
  const token = `bench-${randomBytes(12).toString("hex")}`;
  const start = (b: Build) =>
    startChild(process.execPath, [b.cli, "dev", "--project", projectDir, "--port", "0", "--data-dir", benchDir("wcx-compare-data-")], /MCP URL: (\S+)/, {
      WEBCODEX_DEV_TOKEN: token,
      WEBCODEX_LOG_LEVEL: "warn",
    });
  const [a, b] = [await start(base), await start(ours)];
  try {
    const [urlA, urlB] = [a.match[1] as string, b.match[1] as string];
    const [ca, cb] = [await connect(urlA, token), await connect(urlB, token)];
    const probeA = await readProbe(ca);
    const probeB = await readProbe(cb);
    const latency = await pairedLatency(probeA, probeB);
    await ca.close();
    await cb.close();
    // Throughput in alternation, base first then this build, three times each.
    const ratios: number[] = [];
    const rates = { a: [] as number[], b: [] as number[] };
    for (let i = 0; i < 3; i++) {
      const ta = await throughput(urlA, token, "read_files", probeA.args, 16, 3_000);
      const tb = await throughput(urlB, token, "read_files", probeB.args, 16, 3_000);
      if (ta.errors + tb.errors > 0) throw new Error(`throughput calls failed: base ${ta.errors}, this build ${tb.errors}`);
      rates.a.push(ta.callsPerSecond);
      rates.b.push(tb.callsPerSecond);
      ratios.push(tb.callsPerSecond / ta.callsPerSecond);
    }
    return [
      pairedResult("compare_embedded", latency, "read_files over `webcodex dev` (Streamable HTTP), this build over the base"),
      {
        name: "compare_throughput_16_callers",
        metrics: {
          base_calls_per_s: median(rates.a),
          this_calls_per_s: median(rates.b),
          ratio: round(median(ratios), 2),
          ratio_round_min: round(Math.min(...ratios), 2),
          ratio_round_max: round(Math.max(...ratios), 2),
        },
        notes: "raw JSON-RPC, 16 callers, 3 s per side, 3 alternations; this build over the base",
      },
    ];
  } finally {
    await stopChild(a.child);
    await stopChild(b.child);
  }
}

async function compareDistributed(base: Build, ours: Build, projectDir: string): Promise<BenchResult> {
  const token = `bench-${randomBytes(12).toString("hex")}`;
  const databases = [await createBenchDatabase(postgresAdminUrl, "wcx_compare"), await createBenchDatabase(postgresAdminUrl, "wcx_compare")];
  const stacks: DistributedStack[] = [];
  try {
    for (const [i, b] of [base, ours].entries()) {
      stacks.push(
        await b.startDistributed({
          basePort: await b.findFreeBasePort(),
          postgresUrl: (databases[i] as { url: string }).url,
          redisUrl,
          projectDir,
          ...benchStackOptions(token),
        }),
      );
    }
    const [ca, cb] = [await connect((stacks[0] as DistributedStack).mcpUrl, token), await connect((stacks[1] as DistributedStack).mcpUrl, token)];
    try {
      return pairedResult(
        "compare_distributed",
        await pairedLatency(await readProbe(ca), await readProbe(cb)),
        "read_files through six processes, this build over the base",
      );
    } finally {
      await ca.close();
      await cb.close();
    }
  } finally {
    for (const s of stacks) await s.stop();
    for (const d of databases) await d.drop();
  }
}

async function main(): Promise<void> {
  const baseRoot = process.argv[2];
  if (!baseRoot) {
    process.stderr.write("usage: node tools/bench/dist/compare.js <built checkout to compare against>\n");
    process.exit(2);
  }
  const base = await loadBuild("base", resolve(baseRoot));
  const ours = await loadBuild("this", resolve(cliPathForBench, "../../../.."));
  const projectDir = createBenchProject();
  const results: BenchResult[] = [];
  results.push(await compareStdio(base, ours, projectDir));
  results.push(...(await compareEmbedded(base, ours, projectDir)));
  results.push(await compareDistributed(base, ours, projectDir));
  process.stdout.write(`\nthis build over ${resolve(baseRoot)}\n\n${resultTable("comparison", results)}`);
  mkdirSync("bench-results", { recursive: true });
  writeFileSync(join("bench-results", "compare.json"), JSON.stringify({ at: new Date().toISOString(), base: resolve(baseRoot), results }, null, 2));
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench-compare failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
