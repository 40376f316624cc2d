/**
 * Child script of the `spawn` bench: touches 800 MB (the embedded server's size), then
 * measures spawning `true` directly and through the Runner's spawn host from this process.
 * Prints one JSON line: { rss_mib, direct_p50_ms, host_p50_ms }.
 */
import { spawn } from "node:child_process";
import { createSpawnHost } from "@webcodex/runner";
import type { SpawnedChild } from "@webcodex/runner";
import { median, round } from "./stats.js";

const RUNS = 60;
const ballast = Buffer.alloc(800e6, 1);

function done(child: SpawnedChild): Promise<void> {
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.stdout.resume();
    child.stderr.resume();
    child.on("close", () => resolve());
  });
}

async function p50(start: () => SpawnedChild): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < RUNS + 5; i++) {
    const t = performance.now();
    await done(start());
    if (i >= 5) samples.push(performance.now() - t);
  }
  return median(samples);
}

const host = createSpawnHost();
const direct = await p50(() => spawn("true", [], { stdio: ["ignore", "pipe", "pipe"], detached: true }) as SpawnedChild);
const hosted = await p50(() => host.spawn("true", [], { cwd: "/", detached: true }));
await host.close();
process.stdout.write(
  `${JSON.stringify({ rss_mib: round(process.memoryUsage().rss / 2 ** 20, 0), direct_p50_ms: round(direct), host_p50_ms: round(hosted), ballast: ballast[0] })}\n`,
);
