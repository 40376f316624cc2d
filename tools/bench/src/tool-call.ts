/**
 * Tool-call latency and throughput: the same MCP SDK client calls read_files on WebCodex
 * (embedded and distributed) and read_file on a bare SDK server that reads the file itself,
 * in the same run, on the same file.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Agent, request } from "node:http";
import { median, percentile, round } from "./stats.js";

export const baselineServerPath = fileURLToPath(new URL("./baseline-server.js", import.meta.url));
/** The reference MCP filesystem server's entry point (pinned in this package's dependencies). */
export const filesystemServerPath = createRequire(import.meta.url).resolve("@modelcontextprotocol/server-filesystem/dist/index.js");

/** An SDK client over stdio to a server started as `command args` (its stderr is dropped). */
export async function connectStdio(command: string, args: string[], env: Record<string, string>): Promise<Client> {
  const client = new Client({ name: "webcodex-bench", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command, args, env, stderr: "ignore" }));
  return client;
}

export async function connect(url: string, token?: string): Promise<Client> {
  const client = new Client({ name: "webcodex-bench", version: "1.0.0" });
  // The SDK's HTTP transport passes its one AbortSignal to every request, and undici unhooks a
  // request's abort listener only when the request is garbage-collected: a run of thousands of
  // calls piles them on that signal (and Node warns, with a stack trace, on each one past 1,500).
  // A call's POST completes on its own; only the long-lived GET stream needs the signal.
  const fetchWithoutPostSignal: typeof fetch = (input, init) => fetch(input, init?.method === "POST" ? { ...init, signal: null } : init);
  const headers = token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : {};
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { ...headers, fetch: fetchWithoutPostSignal }));
  return client;
}

/** One tool call on one client: what a latency measurement repeats. */
export interface Probe {
  client: Client;
  name: string;
  args: Record<string, unknown>;
}

async function callOnce(probe: Probe): Promise<number> {
  const t = performance.now();
  const res = await probe.client.callTool({ name: probe.name, arguments: probe.args });
  const ms = performance.now() - t;
  if (res.isError) throw new Error(`${probe.name} failed during the benchmark: ${JSON.stringify(res.structuredContent ?? res.content)}`);
  return ms;
}

/** Sequential latency of one tool call, in ms, after warm-up. */
export async function latency(client: Client, name: string, args: Record<string, unknown>, calls: number): Promise<{ p50: number; p99: number }> {
  const probe = { client, name, args };
  for (let i = 0; i < 50; i++) await callOnce(probe);
  const samples: number[] = [];
  for (let i = 0; i < calls; i++) samples.push(await callOnce(probe));
  return { p50: round(median(samples)), p99: round(percentile(samples, 99)) };
}

export interface PairedLatency {
  /** Median of the round medians, in ms, and the p99 over all of a side's calls. */
  a: { p50: number; p99: number };
  b: { p50: number; p99: number };
  /** Median over rounds of (b's round median / a's round median). */
  ratio: number;
  /** The per-round ratios, so a reader sees the spread. */
  roundRatios: number[];
}

/** A paired measurement's ratio and the spread of its per-round ratios, as bench metrics. */
export function ratioMetrics(m: PairedLatency): { ratio_p50: number; ratio_p50_round_min: number; ratio_p50_round_max: number } {
  return { ratio_p50: m.ratio, ratio_p50_round_min: Math.min(...m.roundRatios), ratio_p50_round_max: Math.max(...m.roundRatios) };
}

/**
 * p50 latency of two calls measured side by side, in the same run. Both are warmed up in
 * alternation (V8 keeps optimizing a server for the first thousand or so calls), then
 * `rounds` rounds each make `callsPerRound` calls on one side and then the other, the side
 * that goes first alternating. The ratio is the median of the per-round ratios, so drift of
 * the machine over the run (frequency, other load) hits both sides of every ratio alike.
 */
export async function pairedLatency(a: Probe, b: Probe, options: { rounds?: number; callsPerRound?: number; warmup?: number } = {}): Promise<PairedLatency> {
  const rounds = options.rounds ?? 12;
  const callsPerRound = options.callsPerRound ?? 100;
  const warmup = options.warmup ?? 1_000;
  for (let i = 0; i < warmup; i++) {
    await callOnce(a);
    await callOnce(b);
  }
  const all = { a: [] as number[], b: [] as number[] };
  const medians = { a: [] as number[], b: [] as number[] };
  for (let r = 0; r < rounds; r++) {
    for (const side of r % 2 === 0 ? (["a", "b"] as const) : (["b", "a"] as const)) {
      const probe = side === "a" ? a : b;
      const samples: number[] = [];
      for (let i = 0; i < callsPerRound; i++) samples.push(await callOnce(probe));
      all[side].push(...samples);
      medians[side].push(median(samples));
    }
  }
  const roundRatios = medians.b.map((m, i) => round(m / (medians.a[i] as number), 3));
  const side = (s: "a" | "b") => ({ p50: round(median(medians[s])), p99: round(percentile(all[s], 99)) });
  return { a: side("a"), b: side("b"), ratio: round(median(roundRatios), 2), roundRatios };
}

/**
 * Throughput with `concurrency` callers for `durationMs`, sending raw JSON-RPC tools/call
 * over keep-alive HTTP/1.1 (a lighter client than the SDK, so the server is what is measured).
 */
export async function throughput(
  url: string,
  token: string,
  name: string,
  args: Record<string, unknown>,
  concurrency: number,
  durationMs: number,
): Promise<{ callsPerSecond: number; calls: number; errors: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const target = new URL(url);
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } });
  const headers = {
    authorization: `Bearer ${token}`,
    accept: "application/json, text/event-stream",
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(body)),
  };
  const once = () =>
    new Promise<boolean>((resolve) => {
      const req = request({ agent, host: target.hostname, port: target.port, path: target.pathname, method: "POST", headers }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          text += d;
        });
        res.on("end", () => resolve(res.statusCode === 200 && !text.includes('"isError":true')));
      });
      req.on("error", () => resolve(false));
      req.end(body);
    });
  let done = 0;
  let errors = 0;
  const deadline = performance.now() + durationMs;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        if (await once()) done += 1;
        else errors += 1;
      }
    }),
  );
  agent.destroy();
  return { callsPerSecond: round(done / ((performance.now() - start) / 1000), 0), calls: done, errors };
}

/** The project_ref a fresh caller gets from list_projects (refs are issued on discovery). */
export async function projectRefOf(client: Client): Promise<string> {
  const res = await client.callTool({ name: "list_projects", arguments: {} });
  const projects = (res.structuredContent as { projects?: Array<{ project_ref: string }> } | undefined)?.projects;
  const ref = projects?.[0]?.project_ref;
  if (!ref) throw new Error(`list_projects returned no project: ${JSON.stringify(res.structuredContent)}`);
  return ref;
}
