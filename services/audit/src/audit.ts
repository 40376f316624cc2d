/**
 * The audit service: ActionAudit, one append-only row per tool call. Records carry codes,
 * identities, timings, sizes and a hashed argument shape only; the schema has no column that
 * could hold arguments, paths, commands, file contents, parser errors or tokens, and its
 * CHECKs refuse free text in the code and hash columns.
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { AuditService, ActionRecord, ActionRecordSchema } from "@webcodex/proto";
import { CallOutcome, callOutcomeFromString, isToolInputNormalizationCode, stageTimingKeyFromString } from "@webcodex/contracts";
import type { ToolInputNormalizationCode } from "@webcodex/contracts";
import { principalFromHeaders, runMigrations } from "@webcodex/platform";
import type { Database } from "@webcodex/platform";
import { auditMigrations } from "./migrations.js";
import { dayOf, ensurePartitions, listPartitionDays, retentionCutoffDay } from "./partitions.js";

export const AUDIT_SCHEMA = "audit";

/** ModelErgonomics summary version this service writes. */
export const MODEL_ERGONOMICS_VERSION = 13;

/** `summary.model_ergonomics`: the code only for a canonical success with a known code. */
export interface ModelErgonomicsSummary {
  version: number;
  input_normalization_code?: ToolInputNormalizationCode;
}

/** `summary.validation`: a validation result's verdict, providers and counts; never output text. */
export interface ValidationAuditSummary {
  status: string;
  providers: string[];
  tests: { passed: number; failed: number; skipped: number };
  diagnostics: { errors: number; warnings: number };
}

/** `summary.continuation`: what followed a continuation card, one entry per fact this call established. */
export interface ContinuationAuditFact {
  subject: "job" | "agent";
  id: string;
  fact: string;
}

/** `summary.upstream`: the upstream MCP server and tool of an mcp_tool call, and the bytes each way. */
export interface UpstreamAuditSummary {
  server: string;
  tool: string;
  request_bytes: number;
  response_bytes: number;
}

export interface ActionSummary {
  model_ergonomics: ModelErgonomicsSummary;
  validation?: ValidationAuditSummary;
  continuation?: ContinuationAuditFact[];
  upstream?: UpstreamAuditSummary;
  /** The run_code_cell call this call ran inside (a call id, nothing else is stored). */
  parent_call_id?: string;
}

const UPSTREAM_SERVER = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const UPSTREAM_TOOL = /^[A-Za-z0-9_.:/-]{1,128}$/;

/** The stored form of a record's upstream call: a known-shaped server id and tool name only, else nothing. */
export function upstreamSummary(u: ActionRecord["upstream"]): UpstreamAuditSummary | undefined {
  if (!u || !UPSTREAM_SERVER.test(u.server) || !UPSTREAM_TOOL.test(u.tool)) return undefined;
  return { server: u.server, tool: u.tool, request_bytes: clampInt(Number(u.requestBytes)), response_bytes: clampInt(Number(u.responseBytes)) };
}

/** Call ids are UUIDs the gateway makes; anything else is never stored as a parent. */
const CALL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function withParent(summary: ActionSummary, parentCallId: string): ActionSummary {
  return CALL_ID.test(parentCallId) ? { ...summary, parent_call_id: parentCallId } : summary;
}

const CONTINUATION_FACT = /^(dispatch_(claimed|accepted|rejected|uncertain)|fresh_turn_observed|consumed)$/;
/** Job and Agent ids are short opaque words; anything else is never stored. */
const CONTINUATION_ID = /^[A-Za-z0-9_.:-]{1,80}$/;

/** The stored form of a record's continuation facts: known subjects and facts, opaque ids only, bounded. */
export function continuationFacts(facts: ActionRecord["continuationFacts"]): ContinuationAuditFact[] | undefined {
  const kept = facts
    .filter((f) => (f.subject === "job" || f.subject === "agent") && CONTINUATION_ID.test(f.id) && CONTINUATION_FACT.test(f.fact))
    .slice(0, 16)
    .map((f) => ({ subject: f.subject as "job" | "agent", id: f.id, fact: f.fact }));
  return kept.length > 0 ? kept : undefined;
}

const VALIDATION_STATUS = /^(passed|failed|error|unparsed)$/;
const PROVIDER = /^[a-z]{1,16}$/;

/** The stored form of a record's validation summary: known statuses and short provider names only. */
export function validationSummary(v: ActionRecord["validation"]): ValidationAuditSummary | undefined {
  if (!v || !VALIDATION_STATUS.test(v.status)) return undefined;
  return {
    status: v.status,
    providers: [...new Set(v.providers.filter((p) => PROVIDER.test(p)))].sort().slice(0, 8),
    tests: { passed: clampInt(v.testsPassed), failed: clampInt(v.testsFailed), skipped: clampInt(v.testsSkipped) },
    diagnostics: { errors: clampInt(v.errors), warnings: clampInt(v.warnings) },
  };
}

export async function migrateAudit(db: Database): Promise<string[]> {
  return runMigrations(db, AUDIT_SCHEMA, auditMigrations);
}

/**
 * The summary of one record. Failures and unknown codes report no code; at most one code,
 * chosen by the normalizer's precedence, arrives per call.
 */
export function actionSummary(outcome: string, inputNormalizationCode: string): ActionSummary {
  const model_ergonomics: ModelErgonomicsSummary = { version: MODEL_ERGONOMICS_VERSION };
  if (callOutcomeFromString(outcome) === CallOutcome.success && isToolInputNormalizationCode(inputNormalizationCode))
    model_ergonomics.input_normalization_code = inputNormalizationCode;
  return { model_ergonomics };
}

const HEX16 = /^[0-9a-f]{16}$/;
const HEX12 = /^[0-9a-f]{12}$/;
const CODE = /^[a-z][a-z0-9_]{0,63}$/;
const orNull = (s: string) => (s === "" ? null : s);
/** Codes are snake_case words; anything else (prose, paths) is never stored. */
const codeOrNull = (s: string) => (CODE.test(s) ? s : null);
const clampInt = (n: number) => Math.max(0, Math.min(2_147_483_647, Math.round(n)));

/** The stored columns, each with the type of the array its values are sent in (see INSERT_SQL). */
const COLUMN_TYPES = {
  call_id: "text",
  started_at: "timestamptz",
  client_id: "text",
  subject: "text",
  tool: "text",
  project_canonical_id: "text",
  session_id: "text",
  effect: "text",
  outcome: "text",
  reason_code: "text",
  failure_stage: "text",
  state_changed: "boolean",
  outcome_unknown: "boolean",
  duration_us: "integer",
  stage_durations_us: "jsonb",
  args_shape_fingerprint: "text",
  // Sent joined by commas (an array of arrays must be rectangular), split again when stored.
  args_shape_leaves: "text",
  result_canonical_bytes: "integer",
  result_projected_bytes: "integer",
  result_metadata_bytes: "integer",
  summary: "jsonb",
} as const;
const COLUMNS = Object.keys(COLUMN_TYPES) as (keyof typeof COLUMN_TYPES)[];

const SELECTED = COLUMNS.map((c) => (c === "args_shape_leaves" ? `string_to_array(${c}, ',')` : c));
const ARRAYS = COLUMNS.map((c, k) => `$${k + 1}::${COLUMN_TYPES[c]}[]`);
/**
 * One statement for any number of rows: a parameter per column, each an array of that column's
 * values, unnested into rows. Its text never changes, so Postgres parses and plans the same few
 * parameters for every batch (a VALUES list takes a parameter per column per row: thousands to
 * parse for one batch of reads).
 */
const INSERT_SQL =
  `INSERT INTO ${AUDIT_SCHEMA}.action_audit (${COLUMNS.join(",")}) SELECT ${SELECTED.join(",")} ` +
  `FROM unnest(${ARRAYS.join(",")}) AS r(${COLUMNS.join(",")}) ON CONFLICT (call_id, started_at) DO NOTHING`;

function rowValues(r: ActionRecord): unknown[] {
  // Anything but a success is stored as a failure (the table holds settled outcomes only).
  const ok = callOutcomeFromString(r.outcome) === CallOutcome.success;
  const shape = r.argumentShape && HEX16.test(r.argumentShape.fingerprint) ? r.argumentShape : undefined;
  const size = ok ? r.resultSize : undefined;
  const stages: Record<string, number> = {};
  // Only the pipeline's own stage and sub-stage names are stored; any other key (prose, a name this build does not know) is dropped.
  for (const [k, v] of Object.entries(r.stageDurationsUs)) if (stageTimingKeyFromString(k) !== undefined) stages[k] = clampInt(v);
  return [
    r.callId,
    new Date(Number(r.startedAtUnixMs)).toISOString(),
    r.clientId,
    r.subject,
    codeOrNull(r.tool) ?? "unknown_tool",
    orNull(r.projectCanonicalId),
    orNull(r.sessionId),
    codeOrNull(r.effect) ?? "unknown",
    ok ? CallOutcome.success : CallOutcome.failure,
    ok ? null : codeOrNull(r.reasonCode),
    ok ? null : codeOrNull(r.failureStage),
    r.stateChanged,
    r.outcomeUnknown,
    clampInt(r.durationUs),
    JSON.stringify(stages),
    shape?.fingerprint ?? null,
    // Joined by commas (see COLUMN_TYPES); split again by INSERT_SQL.
    shape ? [...new Set(shape.leaves.filter((l) => HEX12.test(l)))].sort().slice(0, 64).join(",") : null,
    size ? clampInt(size.canonicalBytes) : null,
    size ? clampInt(size.projectedBytes) : null,
    size ? clampInt(size.projectedMetadataBytes) : null,
    JSON.stringify(
      withParent(
        withUpstream(
          withContinuation(
            withValidation(actionSummary(r.outcome, r.inputNormalizationCode), ok ? validationSummary(r.validation) : undefined),
            continuationFacts(r.continuationFacts),
          ),
          upstreamSummary(r.upstream),
        ),
        r.parentCallId,
      ),
    ),
  ];
}

const MAX_ROWS_PER_STATEMENT = 1_000;

/** Partition days known to exist, per database (a partition is never dropped while it is current). */
const knownDays = new WeakMap<Database, Set<number>>();

async function ensureDays(db: Database, days: Set<number>, refresh: boolean): Promise<void> {
  let known = knownDays.get(db);
  if (!known || refresh) {
    known = new Set(await listPartitionDays(db, AUDIT_SCHEMA));
    knownDays.set(db, known);
  }
  const missing = [...days].filter((d) => !known.has(d));
  if (missing.length === 0) return;
  await ensurePartitions(db, AUDIT_SCHEMA, missing);
  for (const d of missing) known.add(d);
}

export interface AppendOptions {
  /** Records older than this many days are past retention: acknowledged, never stored. */
  retentionDays?: number;
  now?: number;
}

/**
 * Appends records idempotently by (call_id, started_at) in one statement, creating any
 * partition a record needs; returns how many were new. A replayed record is a no-op.
 */
export async function appendActions(db: Database, records: readonly ActionRecord[], options: AppendOptions = {}): Promise<number> {
  const cutoff = options.retentionDays !== undefined ? retentionCutoffDay(options.now ?? Date.now(), options.retentionDays) : -Infinity;
  const unique = new Map<string, ActionRecord>();
  for (const r of records) {
    if (!r.callId || Number(r.startedAtUnixMs) < cutoff) continue;
    unique.set(`${r.callId}\u0000${r.startedAtUnixMs}`, r);
  }
  if (unique.size === 0) return 0;
  const all = [...unique.values()];
  await ensureDays(db, new Set(all.map((r) => dayOf(Number(r.startedAtUnixMs)))), false);
  let stored = 0;
  // A statement's arrays stay bounded however many records one request brings.
  for (let at = 0; at < all.length; at += MAX_ROWS_PER_STATEMENT) {
    const batch = all.slice(at, at + MAX_ROWS_PER_STATEMENT);
    const values: unknown[][] = COLUMNS.map(() => []);
    for (const r of batch) rowValues(r).forEach((v, k) => values[k]?.push(v));
    try {
      stored += (await db.query(INSERT_SQL, values)).rowCount;
    } catch (error) {
      // 23514: no partition for a row (e.g. dropped by another replica's retention): refresh once.
      if ((error as { code?: string }).code !== "23514") throw error;
      await ensureDays(db, new Set(batch.map((r) => dayOf(Number(r.startedAtUnixMs)))), true);
      stored += (await db.query(INSERT_SQL, values)).rowCount;
    }
  }
  return stored;
}

function withValidation(summary: ActionSummary, validation: ValidationAuditSummary | undefined): ActionSummary {
  return validation ? { ...summary, validation } : summary;
}

function withUpstream(summary: ActionSummary, upstream: UpstreamAuditSummary | undefined): ActionSummary {
  return upstream ? { ...summary, upstream } : summary;
}

function withContinuation(summary: ActionSummary, continuation: ContinuationAuditFact[] | undefined): ActionSummary {
  return continuation ? { ...summary, continuation } : summary;
}

interface AuditRow {
  call_id: string;
  client_id: string;
  subject: string;
  tool: string;
  project_canonical_id: string | null;
  session_id: string | null;
  effect: string;
  outcome: string;
  reason_code: string | null;
  failure_stage: string | null;
  state_changed: boolean;
  outcome_unknown: boolean;
  started_at: Date | string;
  duration_us: number;
  stage_durations_us: Record<string, number> | string;
  args_shape_fingerprint: string | null;
  args_shape_leaves: string[] | null;
  result_canonical_bytes: number | null;
  result_projected_bytes: number | null;
  result_metadata_bytes: number | null;
  summary: ActionSummary | string;
}

const json = <T>(v: T | string): T => (typeof v === "string" ? (JSON.parse(v) as T) : v);

export function recordFromRow(row: AuditRow): MessageInitShape<typeof ActionRecordSchema> {
  const summary = json<ActionSummary>(row.summary);
  return {
    callId: row.call_id,
    clientId: row.client_id,
    subject: row.subject,
    tool: row.tool,
    projectCanonicalId: row.project_canonical_id ?? "",
    sessionId: row.session_id ?? "",
    effect: row.effect,
    outcome: row.outcome,
    reasonCode: row.reason_code ?? "",
    failureStage: row.failure_stage ?? "",
    stateChanged: row.state_changed,
    outcomeUnknown: row.outcome_unknown,
    inputNormalizationCode: summary.model_ergonomics?.input_normalization_code ?? "",
    startedAtUnixMs: BigInt(new Date(row.started_at).getTime()),
    durationUs: row.duration_us,
    stageDurationsUs: json<Record<string, number>>(row.stage_durations_us),
    ...(row.args_shape_fingerprint ? { argumentShape: { fingerprint: row.args_shape_fingerprint, leaves: row.args_shape_leaves ?? [] } } : {}),
    ...(row.result_canonical_bytes !== null
      ? {
          resultSize: {
            canonicalBytes: row.result_canonical_bytes,
            projectedBytes: row.result_projected_bytes ?? 0,
            projectedMetadataBytes: row.result_metadata_bytes ?? 0,
          },
        }
      : {}),
    ...(summary.validation
      ? {
          validation: {
            status: summary.validation.status,
            providers: summary.validation.providers,
            testsPassed: summary.validation.tests.passed,
            testsFailed: summary.validation.tests.failed,
            testsSkipped: summary.validation.tests.skipped,
            errors: summary.validation.diagnostics.errors,
            warnings: summary.validation.diagnostics.warnings,
          },
        }
      : {}),
    ...(summary.continuation ? { continuationFacts: summary.continuation } : {}),
    ...(summary.upstream
      ? {
          upstream: {
            server: summary.upstream.server,
            tool: summary.upstream.tool,
            requestBytes: BigInt(summary.upstream.request_bytes),
            responseBytes: BigInt(summary.upstream.response_bytes),
          },
        }
      : {}),
    ...(summary.parent_call_id ? { parentCallId: summary.parent_call_id } : {}),
  };
}

export interface AuditDeps {
  db: Database;
  /** Records older than this are past retention and not stored (see partitions.ts). */
  retentionDays?: number;
}

export function createAudit(deps: AuditDeps): ServiceImpl<typeof AuditService> {
  return {
    async recordActions(req) {
      return { accepted: await appendActions(deps.db, req.records, deps.retentionDays !== undefined ? { retentionDays: deps.retentionDays } : {}) };
    },
    async listActions(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const limit = Math.min(Math.max(req.limit || 100, 1), 1000);
      const r = await deps.db.query<AuditRow>(`SELECT * FROM ${AUDIT_SCHEMA}.action_audit WHERE client_id=$1 ORDER BY started_at DESC, call_id LIMIT $2`, [
        principal.clientId,
        limit,
      ]);
      return { records: r.rows.map(recordFromRow) };
    },
  };
}
