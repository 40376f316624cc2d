/**
 * One concept over 400 lines: the service-kill harness (stack, faults, workload and judging share its state).
 *
 * Service kills and datastore restarts under load, against the distributed stack `webcodex up`
 * starts (startDistributed: six processes on their own ports, a private PostgreSQL cluster and
 * a private Redis owned by the harness). 16 callers, each a real MCP SDK client over Streamable
 * HTTP with its own principal (dev tokens file: tenant `local`, subject `c<i>`), run a mixed
 * workload (reads, searches, project listing, two-file edits, shell commands that write a file,
 * Session creation) while the harness kills one service with SIGKILL and starts it again the
 * way `webcodex up` started it (`webcodex up` has no supervisor), or stops and starts
 * PostgreSQL (`pg_ctl stop -m fast`) or Redis (SIGTERM; no persistence, so every key is gone).
 *
 * Judged per fault, from the outside:
 * - misreported: a call answered as succeeded whose effect is not there (the created files with
 *   their content, the file a shell command writes, the Session row with its title, a read's
 *   content), or a structured failure that says nothing changed while its effect is there, or
 *   a two-file edit found half applied;
 * - unstructured: any answer that is not a tool result with `reason_code` and `failure_stage`
 *   (a JSON-RPC error, an HTTP error status, no answer within the call deadline), and any
 *   transport failure except while the gateway itself is down (then the connection is refused
 *   or reset: nothing can answer);
 * - audit: every call the client got an answer for has exactly one `audit.action_audit` row
 *   (same subject and tool, outcome matching what the client was told), a call that never
 *   reached a gateway has none, a call cut off with the gateway has at most one; rows are
 *   matched to calls by subject and time (each client's calls are sequential);
 * - recovery: from the moment the restart is issued to the first successful call started after
 *   it, and to the moment every kind of call that failed during the outage has succeeded again.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { findFreeBasePort, projectIdFor, startDistributed } from "@webcodex/cli";
import type { DistributedStack, ServiceName } from "@webcodex/cli";
import { createProjectDir, startPrivatePostgres, startPrivateRedis, tempDir } from "../support/index.js";
import type { PrivatePostgres, PrivateRedis } from "../support/index.js";
import { mulberry32 } from "@webcodex/platform/prng";

export const FAULTS = ["gateway", "tool-registry", "ref-resolver", "audit", "runner-broker", "runner", "postgres", "redis"] as const;
export type FaultName = (typeof FAULTS)[number];

export interface ServiceKillOptions {
  clients: number;
  /** Load before each fault, milliseconds. */
  warmMs: number;
  /** How long the killed service (or the datastore) stays down. */
  outageMs: number;
  /** Load after recovery before the next fault. */
  settleMs: number;
  /** Pause between one client's calls, milliseconds (default 0). */
  thinkMs?: number;
  /** The bound the stack must recover within (every kind of call that failed works again). */
  recoveryBoundMs: number;
  /** Faults to apply, in order (default: all). */
  faults?: readonly FaultName[];
  /** Rounds over the list of faults (the long version runs several). */
  rounds?: number;
  seed?: number;
}

export interface FaultFigures {
  fault: string;
  calls_tried: number;
  succeeded: number;
  failed_structured: number;
  /** Refused or reset connections while the gateway was down (nothing could answer). */
  gateway_unreachable: number;
  /** Calls cut off with the gateway (the request was sent, no answer came back). */
  cut_off: number;
  unstructured: number;
  misreported: number;
  partial_edits: number;
  audit_rows_expected: number;
  audit_rows_found: number;
  audit_rows_lost: number;
  audit_rows_duplicated: number;
  audit_outcome_mismatches: number;
  /** Restart issued → first call started after it that succeeded. */
  first_success_ms: number;
  /** Restart issued → every kind of call that failed during the outage has succeeded again. */
  recovery_ms: number;
  /** Restart issued → the process answers its readiness probe (or the datastore accepts connections). */
  restart_ready_ms: number;
  /** recovery_ms beyond restart_ready_ms: how long the rest of the stack took to use the restarted process. */
  recovery_after_ready_ms: number;
  reason_codes: Record<string, number>;
}

export interface ServiceKillFigures {
  clients: number;
  recovery_bound_ms: number;
  faults: FaultFigures[];
  totals: {
    calls_tried: number;
    misreported: number;
    unstructured: number;
    audit_rows_expected: number;
    audit_rows_found: number;
    audit_rows_lost: number;
    audit_rows_duplicated: number;
    recovery_ms_max: number;
  };
  /** Everything that violated a guarantee, one line each (must be empty). */
  problems: string[];
}

type Kind = "read" | "search" | "list" | "edit" | "shell" | "session" | "handoff";
type Verdict = "succeeded" | "failed" | "unreachable" | "cut_off" | "unstructured";

interface CallRecord {
  client: number;
  seq: number;
  kind: Kind;
  tool: string;
  phase: string;
  startedAt: number;
  endedAt: number;
  verdict: Verdict;
  result?: Record<string, unknown>;
  error?: string;
  /** What the call should have done, for checking. */
  effect?: { files?: Array<{ path: string; content: string }>; title?: string };
  auditRows: number;
  auditOutcomes: string[];
}

const README = "# service kills\n\nA project the fault suite reads, searches and edits.\n";
const CALL_DEADLINE_MS = 30_000;
const DIRECT = new Set(["read_files", "search_project_texts", "edit_project_files", "run_shell", "list_projects"]);

/** True for an error that says the connection to the gateway failed (refused, reset, closed). */
function transportError(error: unknown): boolean {
  const seen = new Set<unknown>();
  let e: unknown = error;
  while (e && typeof e === "object" && !seen.has(e)) {
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^(ECONNREFUSED|ECONNRESET|EPIPE|UND_ERR_SOCKET|UND_ERR_CLOSED|ECONNABORTED)$/.test(code)) return true;
    const message = (e as { message?: unknown }).message;
    if (typeof message === "string" && /fetch failed|socket hang up|other side closed|terminated/i.test(message)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

function refused(error: unknown): boolean {
  const seen = new Set<unknown>();
  let e: unknown = error;
  while (e && typeof e === "object" && !seen.has(e)) {
    seen.add(e);
    if ((e as { code?: unknown }).code === "ECONNREFUSED") return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

export async function runServiceKills(options: ServiceKillOptions): Promise<ServiceKillFigures> {
  const faults = options.faults ?? FAULTS;
  const rounds = options.rounds ?? 1;
  const problems: string[] = [];
  let postgres: PrivatePostgres | undefined;
  let redis: PrivateRedis | undefined;
  let stack: DistributedStack | undefined;
  let sql: pg.Client | undefined;
  const clients: Client[] = [];
  const began = Date.now();
  try {
    [postgres, redis] = await Promise.all([startPrivatePostgres(), startPrivateRedis()]);
    const projectDir = createProjectDir({ "README.md": README, "src/needle.txt": "a haystack with one needle-7f3 in it\n" }, { name: "servicekills" });
    const project = `agent:local:${projectIdFor(projectDir)}`;
    const tokens = Array.from({ length: options.clients }, (_, i) => ({
      token: `tk-${i}-${randomBytes(16).toString("hex")}`,
      client_id: "local",
      subject: `c${i}`,
    }));
    const tokensFile = join(tempDir("wcx-kills-tokens-"), "tokens.json");
    writeFileSync(tokensFile, JSON.stringify({ tokens }));
    // What `webcodex up` gives the gateway (tokens file), rate limit lifted (the load is not throttled)
    // and the audit spool as the chart sets it (one directory: a restarted gateway replays it).
    stack = await startDistributed({
      basePort: await findFreeBasePort(),
      postgresUrl: postgres.url,
      redisUrl: redis.url,
      projectDir,
      clientId: "local",
      gatewayEnv: { WEBCODEX_DEV_TOKENS_FILE: tokensFile, WEBCODEX_RATE_LIMIT_PER_MINUTE: "0", WEBCODEX_AUDIT_SPOOL_DIR: tempDir("wcx-kills-spool-") },
      // The services' own logs (warnings and errors) only when asked for.
      stdio: process.env["WEBCODEX_FAULTS_VERBOSE"] ? "inherit" : "ignore",
    });
    const theStack = stack;
    // The last lines each service wrote to stderr, to say why one exited by itself.
    const tails = new Map<string, string>();
    const watched = new WeakSet<object>();
    const watch = () => {
      for (const [service, proc] of theStack.processes) {
        if (watched.has(proc)) continue;
        watched.add(proc);
        tails.set(service, "");
        proc.stderr?.on("data", (d: Buffer) => tails.set(service, ((tails.get(service) ?? "") + d.toString()).slice(-2_000)));
      }
    };
    watch();
    for (const t of tokens) {
      const c = new Client({ name: `fault-client-${t.subject}`, version: "1.0.0" });
      await c.connect(new StreamableHTTPClientTransport(new URL(stack.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${t.token}` } } }));
      clients.push(c);
    }

    const calls: CallRecord[] = [];
    let phase = "warmup";
    /** While true, a refused or reset connection is the expected consequence of the fault. */
    let gatewayDown = false;
    let stopping = false;
    const random = mulberry32(options.seed ?? 1);
    const rngs = clients.map(() => mulberry32(Math.floor(random() * 2 ** 32)));

    const invoke = async (i: number, seq: number, kind: Kind, tool: string, args: Record<string, unknown>, effect?: CallRecord["effect"]) => {
      const rec: CallRecord = {
        client: i,
        seq,
        kind,
        tool,
        phase,
        startedAt: Date.now(),
        endedAt: 0,
        verdict: "unstructured",
        auditRows: 0,
        auditOutcomes: [],
        ...(effect ? { effect } : {}),
      };
      calls.push(rec);
      const downAtStart = gatewayDown;
      try {
        const [name, params] = DIRECT.has(tool) ? [tool, args] : ["call_runtime_tool", { tool, arguments: args }];
        const res = await clients[i]!.callTool({ name, arguments: params }, undefined, { timeout: CALL_DEADLINE_MS });
        const sc = (res.structuredContent ?? undefined) as Record<string, unknown> | undefined;
        rec.result = sc ?? {};
        if (res.isError !== true) rec.verdict = "succeeded";
        else if (sc && typeof sc["reason_code"] === "string" && typeof sc["failure_stage"] === "string") rec.verdict = "failed";
        else rec.verdict = "unstructured";
      } catch (error) {
        rec.error =
          error instanceof Error
            ? `${error.name}: ${error.message}${(error as { cause?: { code?: string } }).cause?.code ? ` (${(error as { cause?: { code?: string } }).cause?.code})` : ""}`
            : String(error);
        if ((downAtStart || gatewayDown) && transportError(error)) rec.verdict = refused(error) ? "unreachable" : "cut_off";
        else rec.verdict = "unstructured";
      }
      rec.endedAt = Date.now();
      return rec;
    };

    const loop = async (i: number) => {
      const rng = rngs[i]!;
      let seq = 0;
      while (!stopping) {
        seq += 1;
        const r = rng();
        let rec: CallRecord;
        if (r < 0.22) rec = await invoke(i, seq, "read", "read_files", { project, files: [{ path: "README.md" }] });
        else if (r < 0.32) rec = await invoke(i, seq, "search", "search_project_texts", { project, queries: [{ pattern: "needle-7f3" }] });
        else if (r < 0.42) rec = await invoke(i, seq, "list", "list_projects", {});
        else if (r < 0.67) {
          const tok = randomBytes(6).toString("hex");
          const files = [
            { path: `c${i}/e${seq}-a.txt`, content: `a ${tok}\n` },
            { path: `c${i}/e${seq}-b.txt`, content: `b ${tok}\n` },
          ];
          rec = await invoke(
            i,
            seq,
            "edit",
            "edit_project_files",
            { project, changes: files.map((f) => ({ kind: "create", path: f.path, content: f.content })) },
            { files },
          );
        } else if (r < 0.82) {
          const tok = randomBytes(6).toString("hex");
          const path = `c${i}/s${seq}.txt`;
          rec = await invoke(
            i,
            seq,
            "shell",
            "run_shell",
            { project, command: `mkdir -p c${i} && printf '%s' ${tok} > ${path}`, wait_ms: 20_000 },
            { files: [{ path, content: tok }] },
          );
        } else {
          const title = `c${i}-s${seq}-${randomBytes(4).toString("hex")}`;
          rec = await invoke(i, seq, "session", "create_session", { project, title }, { title });
        }
        // A caller whose call failed backs off a little, as a real client would; otherwise a
        // short pause between calls (a model's turn is never back to back).
        await sleep(rec.verdict === "succeeded" ? (options.thinkMs ?? 0) : 200);
      }
    };

    const kindsOf = (from: number, to: number, pred: (c: CallRecord) => boolean) =>
      new Set(calls.filter((c) => c.startedAt >= from && c.startedAt < to && pred(c)).map((c) => c.kind));
    const ALL_KINDS: Kind[] = ["read", "search", "list", "edit", "shell", "session"];

    /** Waits until every kind in `kinds` has a success that started at or after `since`; returns when (ms since `since`). */
    const recovered = async (since: number, kinds: Set<Kind>, bound: number): Promise<{ first: number; all: number }> => {
      const deadline = since + bound;
      for (;;) {
        const ok = calls.filter((c) => c.startedAt >= since && c.verdict === "succeeded" && c.endedAt > 0);
        const first = ok.length > 0 ? Math.min(...ok.map((c) => c.endedAt)) - since : -1;
        const missing = [...kinds].filter((k) => !ok.some((c) => c.kind === k));
        if (first >= 0 && missing.length === 0) {
          const all = Math.max(first, ...[...kinds].map((k) => Math.min(...ok.filter((c) => c.kind === k).map((c) => c.endedAt)) - since));
          return { first, all };
        }
        if (Date.now() > deadline) {
          problems.push(`${phase}: not recovered within ${bound} ms of the restart (still failing: ${missing.join(", ") || "every call"})`);
          return { first, all: -1 };
        }
        await sleep(50);
      }
    };

    interface PhaseMark {
      name: string;
      start: number;
      end: number;
      restartAt: number;
      restartReadyMs: number;
      firstMs: number;
      recoveryMs: number;
    }
    const marks: PhaseMark[] = [];
    const verbose = (line: string) => void (process.env["WEBCODEX_FAULTS_VERBOSE"] ? process.stderr.write(`${line}\n`) : undefined);
    verbose(`stack up and 16 clients connected after ${Date.now() - began} ms`);
    const loops = clients.map((_, i) => loop(i));
    try {
      // Steady state: every kind of call works before the first fault.
      const t0 = Date.now();
      await recovered(t0, new Set(ALL_KINDS), 60_000);
      await sleep(options.warmMs);
      for (let round = 1; round <= rounds; round++) {
        for (const fault of faults) {
          const name = rounds > 1 ? `${fault}#${round}` : fault;
          phase = name;
          const start = Date.now();
          await sleep(options.warmMs);
          const faultAt = Date.now();
          if (fault === "postgres") await postgres.stop();
          else if (fault === "redis") await redis.stop();
          else {
            const proc = theStack.processes.get(fault as ServiceName);
            if (!proc) throw new Error(`no ${fault} process`);
            if (fault === "gateway") gatewayDown = true;
            const exited = new Promise((r) => proc.once("exit", r));
            proc.kill("SIGKILL");
            await exited;
          }
          await sleep(options.outageMs);
          const restartAt = Date.now();
          if (fault === "postgres") await postgres.start();
          else if (fault === "redis") await redis.start();
          else await theStack.restart(fault as ServiceName);
          const restartReadyMs = Date.now() - restartAt;
          // No other process may have died of the fault (a service that exits when its datastore goes away).
          for (const [service, proc] of theStack.processes) {
            if (proc.exitCode === null && proc.signalCode === null) continue;
            problems.push(
              `${name}: ${service} exited by itself (${proc.exitCode ?? proc.signalCode}); started again. Its last output:\n${tails.get(service) ?? ""}`,
            );
            await theStack.restart(service);
          }
          watch();
          // Every kind that failed (in any way) from the fault on must work again.
          const failedKinds = kindsOf(faultAt, Date.now(), (c) => c.verdict !== "succeeded");
          const rec = await recovered(restartAt, failedKinds.size > 0 ? failedKinds : new Set(ALL_KINDS), options.recoveryBoundMs);
          gatewayDown = false;
          await sleep(options.settleMs);
          marks.push({ name, start, end: Date.now(), restartAt, restartReadyMs, firstMs: rec.first, recoveryMs: rec.all });
          verbose(`${name}: ${calls.filter((c) => c.startedAt >= start).length} calls, restart ready ${restartReadyMs} ms, recovered ${rec.all} ms`);
        }
      }
      phase = "end";
    } finally {
      stopping = true;
      await Promise.all(loops);
    }

    verbose(`faults done after ${Date.now() - began} ms`);
    // ── Checks ────────────────────────────────────────────────────────────────────────
    // Connected only now: a connection held across the Postgres restart would be cut.
    sql = new pg.Client({ connectionString: postgres.url });
    await sql.connect();
    const db = sql;
    const misreports = new Map<CallRecord, string>();
    const partial = new Set<CallRecord>();
    const onDisk = (path: string) => (existsSync(join(projectDir, path)) ? readFileSync(join(projectDir, path), "utf8") : undefined);
    const sessionTitles = new Map<string, number>();
    for (const row of (await db.query<{ title: string }>(`SELECT title FROM refs.sessions WHERE client_id = 'local'`)).rows)
      sessionTitles.set(row.title, (sessionTitles.get(row.title) ?? 0) + 1);
    for (const c of calls) {
      const nothingChanged =
        c.verdict === "unreachable" || (c.verdict === "failed" && c.result?.["state_changed"] === false && c.result?.["outcome_unknown"] !== true);
      const changed = c.verdict === "succeeded" || (c.verdict === "failed" && c.result?.["state_changed"] === true);
      if (c.kind === "read" && c.verdict === "succeeded") {
        const content = (c.result?.["items"] as Array<Record<string, unknown>> | undefined)?.[0]?.["content"];
        if (content !== README) misreports.set(c, `read_files succeeded with content ${JSON.stringify(content)?.slice(0, 80)}`);
      } else if (c.kind === "search" && c.verdict === "succeeded") {
        if (!JSON.stringify(c.result).includes("needle.txt"))
          misreports.set(c, `search succeeded without the match: ${JSON.stringify(c.result).slice(0, 200)}`);
      } else if (c.kind === "list" && c.verdict === "succeeded") {
        if (!JSON.stringify(c.result).includes(project))
          misreports.set(c, `list_projects succeeded without the project: ${JSON.stringify(c.result).slice(0, 200)}`);
      } else if ((c.kind === "edit" || c.kind === "shell") && c.effect?.files) {
        const present = c.effect.files.map((f) => onDisk(f.path) === f.content);
        const somethingThere = c.effect.files.map((f) => onDisk(f.path) !== undefined);
        const r = c.result ?? {};
        const shellUnsettled =
          c.kind === "shell" &&
          c.verdict === "succeeded" &&
          (r["execution_state"] === "pending" || r["outcome_unknown"] === true || (r["exit_code"] !== undefined && r["exit_code"] !== 0));
        if (shellUnsettled) {
          // Still running, unknown, or the command itself failed: run_shell said so; the file may or may not be there.
        } else if (changed && present.some((p) => !p))
          misreports.set(
            c,
            `${c.tool} told ${c.verdict}${c.verdict === "failed" ? " with state_changed" : ""}, but ${c.effect.files
              .filter((_, k) => !present[k])
              .map((f) => f.path)
              .join(", ")} not on disk as written`,
          );
        else if (nothingChanged && somethingThere.some((p) => p))
          misreports.set(
            c,
            `${c.tool} told ${c.verdict} with nothing changed, but ${c.effect.files
              .filter((_, k) => somethingThere[k])
              .map((f) => f.path)
              .join(", ")} exists`,
          );
        if (c.kind === "edit" && present.some((p) => p) && present.some((p) => !p)) partial.add(c);
      } else if (c.kind === "session" && c.effect?.title) {
        const n = sessionTitles.get(c.effect.title) ?? 0;
        if (changed && n !== 1) misreports.set(c, `create_session told ${c.verdict}, but ${n} Session rows have its title`);
        else if (nothingChanged && n !== 0) misreports.set(c, `create_session told ${c.verdict} with nothing changed, but its Session exists`);
        else if (n > 1) misreports.set(c, `create_session made ${n} Sessions`);
      }
    }
    // Each client reads the handoff of its last created Session through the stack: a succeeded ref resolves.
    for (let i = 0; i < clients.length; i++) {
      const last = [...calls].reverse().find((c) => c.client === i && c.kind === "session" && c.verdict === "succeeded");
      const sid = last?.result?.["session_id"];
      if (typeof sid !== "string") continue;
      phase = "verify";
      const rec = await invoke(i, 1_000_000, "handoff", "read_session_handoff", { session_id: sid });
      if (rec.verdict !== "succeeded")
        misreports.set(last!, `the Session create_session reported (${sid}) cannot be read back: ${JSON.stringify(rec.result ?? rec.error).slice(0, 200)}`);
      const ref = last?.result?.["session_ref"];
      if (typeof ref === "string") {
        const byRef = await invoke(i, 1_000_001, "handoff", "read_session_handoff", { session_id: ref });
        if (byRef.verdict !== "succeeded")
          misreports.set(
            last!,
            `the session_ref create_session reported (${ref}) does not resolve: ${JSON.stringify(byRef.result ?? byRef.error).slice(0, 200)}`,
          );
      }
    }

    // Audit: wait until the rows stop changing (records held while a service was down are delivered late).
    interface Row {
      subject: string;
      tool: string;
      outcome: string;
      call_id: string;
      started: string;
    }
    const readRows = async () =>
      (
        await db.query<Row>(
          `SELECT subject, tool, outcome, call_id, (extract(epoch from started_at) * 1000)::bigint::text AS started FROM audit.action_audit WHERE client_id = 'local'`,
        )
      ).rows;
    const answered = calls.filter(
      (c) => c.verdict === "succeeded" || c.verdict === "failed" || (c.verdict === "unstructured" && c.result !== undefined),
    ).length;
    let rows = await readRows();
    {
      const deadline = Date.now() + 30_000;
      let stableSince = Date.now();
      let lastCount = rows.length;
      while (Date.now() < deadline) {
        await sleep(250);
        rows = await readRows();
        if (rows.length !== lastCount) {
          lastCount = rows.length;
          stableSince = Date.now();
        } else if (rows.length >= answered && Date.now() - stableSince > 1_500) break;
      }
    }
    const bySubject = new Map<string, CallRecord[]>();
    for (const c of calls) bySubject.set(`c${c.client}`, [...(bySubject.get(`c${c.client}`) ?? []), c]);
    const callIds = new Map<string, number>();
    const orphans: Row[] = [];
    for (const row of rows) {
      callIds.set(row.call_id, (callIds.get(row.call_id) ?? 0) + 1);
      const ts = Number(row.started);
      const mine = bySubject.get(row.subject) ?? [];
      const candidates = mine.filter((c) => c.tool === row.tool && c.startedAt <= ts && ts <= (c.endedAt || Number.MAX_SAFE_INTEGER));
      const target = candidates.find((c) => c.auditRows === 0) ?? candidates[0];
      if (!target) {
        orphans.push(row);
        continue;
      }
      target.auditRows += 1;
      target.auditOutcomes.push(row.outcome);
    }
    const duplicateIds = [...callIds.values()].filter((n) => n > 1).length;

    verbose(`checks done after ${Date.now() - began} ms`);
    // ── Figures per fault ───────────────────────────────────────────────────────────
    const figures: FaultFigures[] = [];
    const judge = (c: CallRecord) => {
      const told = c.verdict === "succeeded" || c.verdict === "failed" || (c.verdict === "unstructured" && c.result !== undefined);
      const expected = told ? 1 : 0;
      const lost = told && c.auditRows === 0 ? 1 : 0;
      const dup = c.verdict === "unreachable" ? c.auditRows : Math.max(0, c.auditRows - 1);
      const mismatch = told && c.auditRows >= 1 && c.auditOutcomes.some((o) => o !== (c.verdict === "succeeded" ? "success" : "failure")) ? 1 : 0;
      return { expected, found: c.auditRows, lost, dup, mismatch };
    };
    for (const m of marks) {
      const mine = calls.filter((c) => c.startedAt >= m.start && c.startedAt < m.end);
      const reason: Record<string, number> = {};
      const f: FaultFigures = {
        fault: m.name,
        calls_tried: mine.length,
        succeeded: 0,
        failed_structured: 0,
        gateway_unreachable: 0,
        cut_off: 0,
        unstructured: 0,
        misreported: 0,
        partial_edits: 0,
        audit_rows_expected: 0,
        audit_rows_found: 0,
        audit_rows_lost: 0,
        audit_rows_duplicated: 0,
        audit_outcome_mismatches: 0,
        first_success_ms: m.firstMs,
        recovery_ms: m.recoveryMs,
        restart_ready_ms: m.restartReadyMs,
        recovery_after_ready_ms: m.recoveryMs < 0 ? -1 : Math.max(0, m.recoveryMs - m.restartReadyMs),
        reason_codes: reason,
      };
      for (const c of mine) {
        if (c.verdict === "succeeded") f.succeeded++;
        else if (c.verdict === "failed") {
          f.failed_structured++;
          const code = `${String(c.result?.["reason_code"])}/${String(c.result?.["failure_stage"])}`;
          reason[code] = (reason[code] ?? 0) + 1;
        } else if (c.verdict === "unreachable") f.gateway_unreachable++;
        else if (c.verdict === "cut_off") f.cut_off++;
        else {
          f.unstructured++;
          problems.push(`${m.name}: unstructured answer to ${c.tool} (client c${c.client}): ${c.error ?? JSON.stringify(c.result).slice(0, 300)}`);
        }
        if (misreports.has(c)) {
          f.misreported++;
          problems.push(`${m.name}: misreported ${c.tool} (client c${c.client}): ${misreports.get(c)}`);
        }
        if (partial.has(c)) {
          f.partial_edits++;
          problems.push(`${m.name}: edit half applied (client c${c.client}, ${c.verdict})`);
        }
        const j = judge(c);
        f.audit_rows_expected += j.expected;
        f.audit_rows_found += j.found;
        f.audit_rows_lost += j.lost;
        f.audit_rows_duplicated += j.dup;
        f.audit_outcome_mismatches += j.mismatch;
        if (j.lost)
          problems.push(
            `${m.name}: audit row lost for ${c.tool} (client c${c.client}, told ${c.verdict}${c.result?.["reason_code"] ? ` ${String(c.result["reason_code"])}` : ""}, ${c.startedAt}..${c.endedAt})`,
          );
        if (j.dup) problems.push(`${m.name}: ${j.dup} extra audit row(s) for ${c.tool} (client c${c.client}, ${c.verdict})`);
        if (j.mismatch) problems.push(`${m.name}: audit outcome ${c.auditOutcomes.join(",")} for ${c.tool} told ${c.verdict} (client c${c.client})`);
      }
      figures.push(f);
    }
    // Calls outside the fault phases (steady state before the first fault, the final checks) are judged too.
    for (const c of calls.filter((c) => !marks.some((m) => c.startedAt >= m.start && c.startedAt < m.end))) {
      if (c.verdict === "unstructured") problems.push(`${c.phase}: unstructured answer to ${c.tool}: ${c.error ?? JSON.stringify(c.result).slice(0, 300)}`);
      if (misreports.has(c)) problems.push(`${c.phase}: misreported ${c.tool}: ${misreports.get(c)}`);
      const j = judge(c);
      if (j.lost || j.dup || j.mismatch)
        problems.push(`${c.phase}: audit ${j.lost ? "row lost" : j.dup ? "row duplicated" : "outcome mismatch"} for ${c.tool} (client c${c.client})`);
    }
    for (const o of orphans) problems.push(`audit row matches no call: ${o.subject} ${o.tool} ${o.outcome} at ${o.started}`);
    if (duplicateIds > 0) problems.push(`${duplicateIds} call_id(s) stored more than once`);

    const sum = (k: keyof FaultFigures) => figures.reduce((n, f) => n + (f[k] as number), 0);
    return {
      clients: options.clients,
      recovery_bound_ms: options.recoveryBoundMs,
      faults: figures,
      totals: {
        calls_tried: sum("calls_tried"),
        misreported: sum("misreported"),
        unstructured: sum("unstructured"),
        audit_rows_expected: sum("audit_rows_expected"),
        audit_rows_found: sum("audit_rows_found"),
        audit_rows_lost: sum("audit_rows_lost"),
        audit_rows_duplicated: sum("audit_rows_duplicated") + orphans.length,
        recovery_ms_max: Math.max(...figures.map((f) => f.recovery_ms)),
      },
      problems,
    };
  } finally {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await sql?.end().catch(() => undefined);
    await stack?.stop().catch(() => undefined);
    await Promise.all([postgres?.destroy(), redis?.destroy()].map((p) => p?.catch(() => undefined)));
  }
}
