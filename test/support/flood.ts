/**
 * The request flood, shared by its `webcodex dev` and `webcodex up` variants: 4 callers send
 * 400,000-key and 4M-deep requests for 3 s while another tenant pings the same MCP endpoint;
 * every flood request must be refused by shape (413), the other tenant's ping p99 must stay
 * under 100 ms, and the server's RSS must come back within 20% of where it started.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { postMcpRaw } from "./mcp.js";
import { tempDir } from "./processes.js";

/** One raw POST to an MCP endpoint as `token` (no client library in the way); `ms` is until the whole answer. */
export const postRaw = (url: string, token: string, body: string) => postMcpRaw(url, { authorization: `Bearer ${token}` }, body);

/** Resident set size of `pid` in bytes (from /proc). */
export const rssOf = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN) * 1024;

export interface FloodFigures {
  /** Flood requests sent (all answered). */
  requests: number;
  pings: number;
  p99Ms: number;
  maxMs: number;
  startRssBytes: number;
  /** The largest RSS seen while the flood ran (sampled with each ping). */
  peakRssBytes: number;
  endRssBytes: number;
  /** How long after the flood the RSS was read for the last time (when it was back, or at the deadline). */
  settleMs: number;
}

/**
 * Runs the flood against `mcpUrl` as `floodToken` while `pingToken` (another tenant) pings;
 * `rss` reads the server process's RSS. Asserts what the probe promises and returns its figures.
 */
export async function floodWhilePinging(o: {
  /** Names the server in the figures line the probe prints (before its assertions, so a failure shows them too). */
  label: string;
  mcpUrl: string;
  floodToken: string;
  pingToken: string;
  rss: () => number;
}): Promise<FloodFigures> {
  const ping = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" });
  // Warm the other tenant's path first, so the probe measures contention only.
  for (let i = 0; i < 3; i++) await postRaw(o.mcpUrl, o.pingToken, ping);
  const startRss = o.rss();
  let peakRss = startRss;
  const dir = tempDir("wcx-flood-");
  const keys = join(dir, "keys.json");
  writeFileSync(
    keys,
    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_projects","arguments":{${Array.from({ length: 400_000 }, (_, k) => `"k${k}":${k}`).join(",")}}}}`,
  );
  const deep = join(dir, "deep.json");
  const depth = 4 * 1024 * 1024 - 64;
  writeFileSync(deep, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${"[".repeat(depth)}}`);
  // The 4 callers share one process of their own (this one's event loop only measures pings,
  // and 4 client processes would compete with the server for 2 cores); each sends for 3 s,
  // alternating the two bodies.
  const sender = `
    const fs = require("node:fs");
    const bodies = [fs.readFileSync(process.argv[1]), fs.readFileSync(process.argv[2])];
    const until = Date.now() + 3000;
    const caller = async () => {
      const seen = [];
      for (let i = 0; Date.now() < until || i < 2; i++) {
        seen.push(await fetch(process.argv[3], { method: "POST", body: bodies[i % 2], headers: { authorization: "Bearer " + process.argv[4], "content-type": "application/json", accept: "application/json, text/event-stream" } })
          .then(async (r) => ({ status: r.status, text: (await r.text()).slice(0, 300) }), (e) => ({ status: 0, text: String(e) })));
      }
      return seen;
    };
    Promise.all([caller(), caller(), caller(), caller()]).then((all) => process.stdout.write(JSON.stringify(all.flat())));`;
  let running = true;
  const flood = new Promise<Array<{ status: number; text: string }>>((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", sender, keys, deep, o.mcpUrl, o.floodToken], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.on("error", reject);
    child.on("close", () => {
      running = false;
      resolve(JSON.parse(out || "[]") as Array<{ status: number; text: string }>);
    });
  });
  const pings: number[] = [];
  while (running || pings.length < 20) {
    pings.push((await postRaw(o.mcpUrl, o.pingToken, ping)).ms);
    peakRss = Math.max(peakRss, o.rss());
    await new Promise((r) => setTimeout(r, 5));
  }
  const answers = await flood;
  assert.ok(answers.length >= 8, `every flood request was answered (${answers.length})`);
  for (const a of answers) {
    assert.equal(a.status, 413, a.text);
    assert.match(a.text, /more than 100000 members|deeper than 64 levels/);
  }
  pings.sort((a, b) => a - b);
  const p99 = pings[Math.min(pings.length - 1, Math.ceil(pings.length * 0.99) - 1)] ?? Infinity;
  // Memory held for the bodies is given back: RSS comes back within 20% of where it started,
  // once the server has collected the refused bodies' buffers (V8 does when the flood's
  // allocation stops: 10-20 s on 2 cores), within 30 s.
  let now = o.rss();
  const floodEnd = Date.now();
  const settleBy = floodEnd + 30_000;
  while (now > startRss * 1.2 && Date.now() < settleBy) {
    await postRaw(o.mcpUrl, o.pingToken, ping);
    await new Promise((r) => setTimeout(r, 250));
    now = o.rss();
  }
  const figures: FloodFigures = {
    requests: answers.length,
    pings: pings.length,
    p99Ms: p99,
    maxMs: pings[pings.length - 1] ?? NaN,
    startRssBytes: startRss,
    peakRssBytes: peakRss,
    endRssBytes: now,
    settleMs: Date.now() - floodEnd,
  };
  process.stdout.write(floodReport(o.label, figures));
  assert.ok(p99 < 100, `another tenant's ping p99 ${p99.toFixed(1)} ms over ${pings.length} pings during the flood`);
  assert.ok(now <= startRss * 1.2, `RSS ${(now / 2 ** 20).toFixed(0)} MiB after the flood, ${(startRss / 2 ** 20).toFixed(0)} MiB before`);
  return figures;
}

/** One line for the test's output: what the flood did and what the other tenant saw. */
const floodReport = (mode: string, f: FloodFigures): string =>
  `# flood (${mode}): ${f.requests} refused requests, other tenant's ping p99 ${f.p99Ms.toFixed(1)} ms (max ${f.maxMs.toFixed(1)} ms, ${f.pings} pings), RSS ${(f.startRssBytes / 2 ** 20).toFixed(0)} -> peak ${(f.peakRssBytes / 2 ** 20).toFixed(0)} -> ${(f.endRssBytes / 2 ** 20).toFixed(0)} MiB ${(f.settleMs / 1000).toFixed(1)} s after the flood\n`;
