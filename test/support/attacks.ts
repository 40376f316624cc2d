/**
 * What the security tests' attackers do, shared by the `webcodex dev` and `webcodex up`
 * variants: create a project and follow it until it is ready, flip directories to symlinks
 * from inside a Job while new workspaces are made (the hand-over race), and name local clone
 * targets in every spelling.
 */
import assert from "node:assert/strict";
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { callTool, executeFollowUp } from "./mcp.js";
import type { ToolOutcome } from "./mcp.js";
import { hostPids } from "./processes.js";
import { until } from "./until.js";

/** A shell word holding `text` as is. */
export const shq = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/** create_project (with `extra` arguments, e.g. visibility), followed until the project is ready or failed. */
export async function createProject(
  client: Client,
  name: string,
  source: Record<string, unknown>,
  extra: Record<string, unknown> = {},
  tries = 120,
): Promise<ToolOutcome> {
  let outcome = await callTool(client, "create_project", { ...extra, name, source, wait_ms: 0 });
  for (let i = 0; i < tries && !outcome.isError && outcome.result["project_state"] === "pending"; i++)
    outcome = await executeFollowUp(client, outcome.result["follow_up"]);
  return outcome;
}

/** run_shell in `project`, waited for; its output (the call must succeed). */
export async function shell(client: Client, project: string, command: string, env: Record<string, string> = {}): Promise<string> {
  const { isError, result } = await callTool(client, "run_shell", { project, command, env, wait_ms: 30_000 });
  assert.equal(isError, false, JSON.stringify(result).slice(0, 500));
  return String(result["output"] ?? result["stdout"] ?? "");
}

/** What the two-tenant tests start from: each tenant's own created project, a secret file in A's, and A's long Job holding a secret in its environment (running when this returns). */
export async function twoTenantProjects(
  a: Client,
  b: Client,
  secrets: { aFile: string; aEnv: string; jobTag: string },
): Promise<{ aProject: string; bProject: string }> {
  const ca = await createProject(a, "a-private", { empty: {} });
  assert.equal(ca.isError, false, JSON.stringify(ca.result));
  const cb = await createProject(b, "b-own", { empty: {} });
  assert.equal(cb.isError, false, JSON.stringify(cb.result));
  const aProject = String(ca.result["project_ref"]);
  const bProject = String(cb.result["project_ref"]);
  await shell(a, aProject, `echo ${secrets.aFile} > private.txt`);
  const started = await callTool(a, "run_shell", {
    project: aProject,
    command: `sleep ${secrets.jobTag}`,
    env: { A_SECRET: secrets.aEnv },
    wait_ms: 100,
    timeout_ms: 120_000,
  });
  assert.equal(started.result["execution_state"], "pending", JSON.stringify(started.result));
  await until("tenant A's Job to run", () => hostPids(secrets.jobTag).length > 0);
  return { aProject, bProject };
}

/** A repository tree of `dirs` directories, each with two subdirectories, `perDir` files per directory, and 4 files at the top. */
export function treeFiles(dirs: number, perDir: number): Record<string, string> {
  const files: Record<string, string> = {};
  for (let d = 0; d < dirs; d++) for (let f = 0; f < perDir; f++) files[`d${d}/s${f % 2}/f${f}.txt`] = `${d}.${f}\n`;
  for (let f = 0; f < 4; f++) files[`top${f}.txt`] = `${f}\n`;
  return files;
}

/** The repository the hand-over race clones: 2,004 files in 150 directories. */
export const HANDOVER_TREE = treeFiles(50, 40);

/**
 * How long the hand-over race goes on: WEBCODEX_HANDOVER_RUNS clones (default 100), stopped
 * early once WEBCODEX_HANDOVER_BUDGET_MS (default 45,000; 0: no bound) has passed and at least
 * 3 were made, so the test finishes within a minute on a busy machine.
 */
export const HANDOVER_RUNS = Number(process.env["WEBCODEX_HANDOVER_RUNS"] ?? 100);
const HANDOVER_BUDGET_MS = Number(process.env["WEBCODEX_HANDOVER_BUDGET_MS"] ?? 45_000);
/** Time for a test holding the race: 10 minutes, or with no budget 30 s per run on top. */
export const handoverTimeoutMs = (): number => 600_000 + (HANDOVER_BUDGET_MS === 0 ? HANDOVER_RUNS * 30_000 : 0);
export const anotherRun = (run: number, startedMs: number): boolean =>
  run < HANDOVER_RUNS && (run < Math.min(3, HANDOVER_RUNS) || HANDOVER_BUDGET_MS === 0 || performance.now() - startedMs < HANDOVER_BUDGET_MS);

/** A root-only tree (as /etc is): a 0700 directory with subdirectories and files, for a flipper to aim at. */
export function canaryTree(dir: string): string {
  for (const sub of ["a/b", "c"]) mkdirSync(join(dir, sub), { recursive: true, mode: 0o700 });
  for (const file of ["x.conf", "a/y.conf", "a/b/z.conf", "c/w.conf"]) writeFileSync(join(dir, file), "canary\n", { mode: 0o600 });
  chmodSync(dir, 0o700);
  return dir;
}

/** Owner (uid, gid) of `root` and of everything under it (symlinks not followed), to compare before and after. */
export function treeOwners(root: string): Array<[string, number, number]> {
  const out: Array<[string, number, number]> = [];
  const walk = (p: string) => {
    const s = lstatSync(p);
    out.push([p, s.uid, s.gid]);
    if (s.isDirectory()) for (const e of readdirSync(p).sort()) walk(join(p, e));
  };
  walk(root);
  return out;
}

/** The flipper: for its duration, turns every directory it finds under the given roots into a symlink to a victim, and back. */
const FLIPPER = `
const fs = require("node:fs"), path = require("node:path");
const [tag, victims, ...roots] = [process.argv[1], JSON.parse(process.argv[2]), ...process.argv.slice(3)];
const end = Date.now() + 600000; let flips = 0, seen = 0, n = 0;
fs.writeFileSync("flipper.started", tag);
while (Date.now() < end && !fs.existsSync("flipper.stop")) {
  for (const root of roots) {
    let stack = [root];
    while (stack.length) {
      const dir = stack.pop(); let entries;
      try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { continue; }
      if (dir !== root) seen++;
      for (const e of entries) {
        if (!e.isDirectory() || e.name === ".git") continue;
        const full = path.join(dir, e.name);
        try {
          fs.renameSync(full, full + ".flip");
          fs.symlinkSync(victims[n++ % victims.length], full);
          flips++;
          fs.unlinkSync(full);
          fs.renameSync(full + ".flip", full);
        } catch {}
        stack.push(full);
      }
    }
  }
  fs.writeFileSync("flipper.report.tmp", JSON.stringify({ flips, seen })); fs.renameSync("flipper.report.tmp", "flipper.report");
}
fs.writeFileSync("flipper.report", JSON.stringify({ flips, seen }));`;

export interface Flipper {
  /** Host pids of the flipper (for cleanup). */
  pids: number[];
  /** Stops it (a stop sign in its workspace, which the host writes) and returns what it did. */
  stop(): Promise<{ flips: number; seen: number }>;
}

/**
 * Starts the flipper as a Job of `project`, whose workspace is `ownRoot` on the host: it flips
 * every directory under its own workspace and under `roots` (as the Job names them) to
 * symlinks at `victims`, and back, until stopped.
 */
export async function startFlipper(
  client: Client,
  project: string,
  ownRoot: string,
  roots: readonly string[],
  victims: readonly string[],
  tag: string,
): Promise<Flipper> {
  const started = await callTool(client, "run_shell", {
    project,
    command: `exec node -e ${shq(FLIPPER)} ${tag} ${shq(JSON.stringify(victims))} "$PWD" ${roots.map(shq).join(" ")}`,
    wait_ms: 100,
    timeout_ms: 900_000,
  });
  assert.equal(started.result["execution_state"], "pending", JSON.stringify(started.result).slice(0, 500));
  await until("the flipper to run", () => existsSync(join(ownRoot, "flipper.started")), 60_000);
  return {
    pids: hostPids(tag),
    async stop() {
      writeFileSync(join(ownRoot, "flipper.stop"), "");
      return until(
        "the flipper's report",
        () =>
          existsSync(join(ownRoot, "flipper.report"))
            ? (JSON.parse(readFileSync(join(ownRoot, "flipper.report"), "utf8")) as { flips: number; seen: number })
            : undefined,
        60_000,
        200,
      );
    },
  };
}

/** Owner (uid, gid) of each path, to compare before and after. */
export const owners = (paths: readonly string[]): Array<[string, number, number]> => paths.map((p) => [p, lstatSync(p).uid, lstatSync(p).gid]);

/** Asserts every file of `files` under `root` belongs to `uid`; returns how many were checked. */
export function assertOwnedBy(root: string, files: Record<string, string>, uid: number, what: string): number {
  let n = 0;
  for (const rel of Object.keys(files)) {
    assert.equal(lstatSync(join(root, rel)).uid, uid, `${what}: ${rel} belongs to the project's uid`);
    n++;
  }
  return n;
}

/** Clone URLs naming this machine (or the cloud metadata address) in every spelling, at `port`. */
export function localCloneTargets(port: number): string[] {
  return [
    `http://127.0.0.1:${port}/x.git`,
    `http://[::1]:${port}/x.git`,
    `http://0x7f000001:${port}/x.git`,
    `http://localhost:${port}/x.git`,
    `git://127.0.0.1:${port}/x.git`,
  ];
}
export const METADATA_TARGET = "http://169.254.169.254/x.git";

export interface TargetProbe {
  /** Detail code of each refusal (an answer that is not an error is recorded as "accepted"). */
  codes: string[];
  /** Milliseconds each call took until its answer, per kind of port named. */
  msByPort: Record<string, number[]>;
}

/**
 * Names each local target in every spelling at each port (`ports`: kind → port; a listener, a
 * closed port, a database), interleaved so drift in the machine's load falls on every kind
 * alike, plus the cloud metadata address; `create` makes a project cloned from the URL.
 */
export async function probeLocalTargets(
  create: (name: string, url: string) => Promise<ToolOutcome>,
  ports: Record<string, number>,
  /** Brings the server to the same state before each timed call (e.g. a loaded warm Runner). */
  settle: () => Promise<unknown> = async () => undefined,
): Promise<TargetProbe> {
  const codes: string[] = [];
  const msByPort: Record<string, number[]> = {};
  const calls: Array<[string, string]> = [];
  const spellings = Object.values(ports).map(localCloneTargets);
  for (let i = 0; i < (spellings[0]?.length ?? 0); i++) Object.keys(ports).forEach((kind, k) => calls.push([kind, spellings[k]![i]!]));
  calls.push(["metadata", METADATA_TARGET]);
  for (const [n, [kind, url]] of calls.entries()) {
    await settle();
    const t0 = performance.now();
    const r = await create(`probe-${n}`, url);
    (msByPort[kind] ??= []).push(performance.now() - t0);
    codes.push(r.isError ? String(r.result["detail_code"]) : "accepted");
  }
  return { codes, msByPort };
}

export const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Each created workspace directory under `webcodex up`'s workspaces dir (`<tenant label>/<project id>`). */
export function upWorkspaces(base: string): string[] {
  if (!existsSync(base)) return [];
  return readdirSync(base)
    .map((t) => join(base, t))
    .filter((t) => lstatSync(t).isDirectory())
    .flatMap((t) =>
      readdirSync(t)
        .filter((e) => !e.startsWith("."))
        .map((e) => join(t, e)),
    );
}
