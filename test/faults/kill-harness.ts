/**
 * Kill -9 harness for write transactions: a real Runner process (RunnerService over HTTP)
 * runs one multi-file edit_project_files transaction (2–5 edited files, some of them large,
 * often with a created file) and is killed with SIGKILL at a random moment during it; the
 * Runner is started again on the same workspace and the harness checks, from the files on
 * disk, that the transaction is either fully applied or fully absent, that what the caller
 * was told matches (success ⇒ applied, a failure ⇒ absent, a broken call ⇒ either), and that
 * the outcome recovery recorded matches the files.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, open, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient, type Client } from "@connectrpc/connect";
import { createServiceTransport } from "@webcodex/platform";
import { RunnerService } from "@webcodex/proto";
import { mulberry32 } from "@webcodex/platform/prng";

const hostScript = fileURLToPath(new URL("./runner-host.js", import.meta.url));

export interface KillRunOptions {
  transactions: number;
  /** false: start the Runner without journal recovery (shows what a crash leaves without it). */
  recover: boolean;
  /** Stop at the first partial transaction (the control run). */
  stopOnPartial?: boolean;
  seed?: number;
  /** Called every 25 transactions with the figures so far (a long run leaves figures even if stopped). */
  onCheckpoint?: (figures: KillRunFigures) => Promise<void>;
  /** Receives every restart time (ms), to merge figures of runs made side by side. */
  restartSamples?: number[];
}

export interface KillRunFigures {
  transactions_tried: number;
  killed_mid_call: number;
  told_succeeded: number;
  told_failed: number;
  told_unknown: number;
  applied: number;
  absent: number;
  partial: number;
  misreported: number;
  recovered_rolled_back: number;
  recovered_completed: number;
  recovery_mismatches: number;
  /** Calls whose caller was told outcome_unknown, whose changes are on disk, and that recovery recorded no outcome for. */
  unreported_applied: number;
  leftover_temp_files: number;
  /** Runner start until the first call answered (recovery included), milliseconds. */
  restart_ms_p50: number;
  restart_ms_max: number;
  problems: string[];
}

const FILES = 12;
const LARGE = new Set([0, 1, 2]);
const LARGE_BYTES = 3 * 1024 * 1024;

interface RunnerProcess {
  child: ChildProcess;
  client: Client<typeof RunnerService>;
  recovered: Array<{ outcome: string; paths: string[] }>;
  /** The Runner's stderr so far (errors only). */
  log(): string;
}

/**
 * How long one Runner process may take from spawn to listening with its recovery finished:
 * about 0.6 s on a quiet machine and 9 s at a load average of 25 on two cores.
 */
const RUNNER_START_LIMIT_MS = 30_000;

async function startRunner(root: string, stateDir: string, recover: boolean): Promise<RunnerProcess> {
  const child = spawn(process.execPath, [hostScript, root, stateDir, recover ? "on" : "off"], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  const lines = await new Promise<{ url: string; recovered: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`runner did not start in ${RUNNER_START_LIMIT_MS / 1000} s\n${out}\n${err}`)), RUNNER_START_LIMIT_MS);
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const url = /RUNNER_URL (\S+)/.exec(out)?.[1];
      const recovered = /RECOVERED (.*)\n/.exec(out)?.[1];
      if (url !== undefined && recovered !== undefined) {
        clearTimeout(timer);
        resolve({ url, recovered });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`runner exited ${code}\n${out}\n${err}`));
    });
  });
  const client = createClient(RunnerService, createServiceTransport(lines.url));
  return { child, client, recovered: JSON.parse(lines.recovered) as RunnerProcess["recovered"], log: () => err };
}

async function kill9(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGKILL");
  await exited;
}

const name = (i: number) => `src/f${String(i).padStart(2, "0")}.txt`;
const body = (i: number, marker: string) => `txn: ${marker}\n` + (LARGE.has(i) ? `${"x".repeat(99)}\n`.repeat(LARGE_BYTES / 100) : `file ${i}\n`);

async function markerOf(root: string, i: number): Promise<string> {
  const text = await readFile(join(root, name(i)), "utf8");
  return /^txn: (\S+)\n/.exec(text)?.[1] ?? "?";
}

/** The marker from the first bytes of a file (cheap enough to poll). */
async function headMarker(root: string, i: number): Promise<string> {
  const handle = await open(join(root, name(i)), "r").catch(() => undefined);
  if (handle === undefined) return "?";
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(64), 0, 64, 0);
    return /^txn: (\S+)\n/.exec(buffer.subarray(0, bytesRead).toString("utf8"))?.[1] ?? "?";
  } finally {
    await handle.close();
  }
}

async function tempFiles(dir: string): Promise<number> {
  let count = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) count += await tempFiles(join(dir, entry.name));
    else if (entry.name.startsWith(".wc-")) count++;
  }
  return count;
}

export async function runKillHarness(options: KillRunOptions): Promise<KillRunFigures> {
  const random = mulberry32(options.seed ?? 1);
  const base = await mkdtemp(join(tmpdir(), "wc-faults-"));
  const root = join(base, "project");
  const stateDir = join(base, "runner-state");
  await mkdir(join(root, "src"), { recursive: true });
  await mkdir(join(root, "created"), { recursive: true });
  for (let i = 0; i < FILES; i++) await writeFile(join(root, name(i)), body(i, "t0"));
  const figures: KillRunFigures = {
    transactions_tried: 0,
    killed_mid_call: 0,
    told_succeeded: 0,
    told_failed: 0,
    told_unknown: 0,
    applied: 0,
    absent: 0,
    partial: 0,
    misreported: 0,
    recovered_rolled_back: 0,
    recovered_completed: 0,
    recovery_mismatches: 0,
    unreported_applied: 0,
    leftover_temp_files: 0,
    restart_ms_p50: 0,
    restart_ms_max: 0,
    problems: [],
  };
  const restarts: number[] = [];
  let estimateMs = 80;
  let fence = 0n;
  let previous: Judged | undefined;
  let runner: RunnerProcess | undefined;
  try {
    for (let n = 1; n <= options.transactions; n++) {
      const started = performance.now();
      runner = await startRunner(root, stateDir, options.recover);
      // read_files waits for recovery, so the first answer marks a Runner ready to serve.
      const count = 2 + Math.floor(random() * 4);
      const chosen = new Set<number>();
      while (chosen.size < count) chosen.add(Math.floor(random() * FILES));
      const files = [...chosen];
      const read = await runner.client.execute({
        callId: `r${n}`,
        tool: "read_files",
        fence: ++fence,
        argumentsJson: JSON.stringify({ files: files.map((i) => ({ path: name(i), end_line: 1 })) }),
      });
      restarts.push(performance.now() - started);
      options.restartSamples?.push(performance.now() - started);
      if (read.failure !== undefined) throw new Error(`read_files failed: ${read.failure.reasonCode} ${read.failure.detailCode}\n${runner.log()}`);
      const items = (JSON.parse(read.resultJson) as { items: Array<{ read_revision?: string }> }).items;

      // Judge the previous transaction now that the Runner restarted (and recovered, if on).
      if (previous !== undefined) {
        const state = await judgeRecovery(figures, runner.recovered, previous, root);
        // A kill before the intent was durable hit nothing: aim later next time.
        if (state === "absent" && runner.recovered.length === 0) estimateMs = Math.min(10_000, estimateMs * 1.25);
      }

      const id = `t${n}`;
      const created = random() < 0.5 ? `created/${id}.txt` : undefined;
      const changes: unknown[] = [];
      for (const [k, i] of files.entries()) {
        const old = await markerOf(root, i);
        changes.push({
          kind: "edit",
          path: name(i),
          expected_read_revision: items[k]?.read_revision,
          edits: [{ replace_exact: { old_text: `txn: ${old}\n`, new_text: `txn: ${id}\n` } }],
        });
      }
      if (created !== undefined) changes.push({ kind: "create", path: created, content: `created by ${id}\n` });
      figures.transactions_tried++;

      const delay = random() * estimateMs * 1.3;
      const callStarted = performance.now();
      let told: "succeeded" | "failed" | "unknown" = "unknown";
      let finished = false;
      const call = runner.client.execute({ callId: id, tool: "edit_project_files", fence: ++fence, argumentsJson: JSON.stringify({ changes }) }).then(
        (res) => {
          finished = true;
          told = res.failure === undefined ? "succeeded" : res.failure.outcomeUnknown ? "unknown" : "failed";
          if (res.failure === undefined) estimateMs = 0.7 * estimateMs + 0.3 * (performance.now() - callStarted);
        },
        () => {
          told = "unknown";
        },
      );
      if (random() < 0.5) {
        // A random moment of the call.
        await new Promise((resolve) => setTimeout(resolve, delay));
      } else {
        // A random moment of the apply phase: once the first change is visible on disk, 0–3 ms later.
        const first = files[0] as number;
        while (!finished && (await headMarker(root, first)) !== id) await new Promise((resolve) => setImmediate(resolve));
        await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * 4)));
      }
      if (!finished) figures.killed_mid_call++;
      await kill9(runner.child);
      await call;
      runner = undefined;
      figures[`told_${told}`]++;
      if (n % 25 === 0) await options.onCheckpoint?.({ ...figures, problems: [...figures.problems] });

      if (!options.recover) {
        // Without recovery the files on disk now are what the next start serves: judge them now.
        const state = await transactionState(root, id, files, created);
        if (state === "partial") {
          figures.partial++;
          figures.problems.push(`${id}: partial (${files.length} files${created ? " + create" : ""}), caller told ${told}`);
        }
        if (state === "applied") figures.applied++;
        if (state === "absent") {
          figures.absent++;
          estimateMs = Math.min(10_000, estimateMs * 1.25);
        }
        if (state === "partial" && options.stopOnPartial) break;
        previous = undefined;
        continue;
      }
      // The caller's view is checked after recovery, in the next round (or the final restart).
      previous = { id, files, created, told };
    }
    if (options.recover && previous !== undefined) {
      runner = await startRunner(root, stateDir, true);
      await judgeRecovery(figures, runner.recovered, previous, root);
      await kill9(runner.child);
      runner = undefined;
    }
  } finally {
    if (runner !== undefined) await kill9(runner.child);
    if (options.recover) figures.leftover_temp_files = existsSync(root) ? await tempFiles(root) : 0;
    await rm(base, { recursive: true, force: true });
  }
  restarts.sort((a, b) => a - b);
  figures.restart_ms_p50 = Math.round(restarts[Math.floor(restarts.length / 2)] ?? 0);
  figures.restart_ms_max = Math.round(restarts[restarts.length - 1] ?? 0);
  return figures;
}

interface Judged {
  id: string;
  files: number[];
  created: string | undefined;
  told: string;
}

async function judgeRecovery(
  figures: KillRunFigures,
  recovered: RunnerProcess["recovered"],
  previous: Judged,
  root: string,
): Promise<"applied" | "absent" | "partial"> {
  {
    const state = await transactionState(root, previous.id, previous.files, previous.created);
    if (state === "applied") figures.applied++;
    else if (state === "absent") figures.absent++;
    else {
      figures.partial++;
      figures.problems.push(`${previous.id}: partial after recovery`);
    }
    const told = previous.told;
    if ((told === "succeeded" && state !== "applied") || (told === "failed" && state !== "absent")) {
      figures.misreported++;
      figures.problems.push(`${previous.id}: caller told ${told}, files ${state}`);
    }
    // The answer never reached the caller but the changes are on disk: recovery must say so.
    if (told === "unknown" && state === "applied" && !recovered.some((r) => r.outcome === "completed")) {
      figures.unreported_applied++;
      figures.problems.push(`${previous.id}: caller told unknown, files applied, no recovered outcome`);
    }
    for (const r of recovered) {
      if (r.outcome === "completed") figures.recovered_completed++;
      else figures.recovered_rolled_back++;
      const expected = r.outcome === "completed" ? "applied" : "absent";
      if (state !== expected) {
        figures.recovery_mismatches++;
        figures.problems.push(`${previous.id}: recovery recorded ${r.outcome}, files ${state}`);
      }
    }
    return state;
  }
}

async function transactionState(root: string, id: string, files: number[], created: string | undefined): Promise<"applied" | "absent" | "partial"> {
  let applied = 0;
  for (const i of files) if ((await markerOf(root, i)) === id) applied++;
  const total = files.length + (created === undefined ? 0 : 1);
  if (created !== undefined && existsSync(join(root, created))) applied++;
  return applied === 0 ? "absent" : applied === total ? "applied" : "partial";
}
