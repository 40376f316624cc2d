/**
 * The audit service: ActionAudit, one append-only row per tool call. Records carry codes,
 * identities and timings only; the schema has no column that could hold arguments, paths,
 * commands, file contents, parser errors or tokens.
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { AuditService } from "@webcodex/proto";
import type { ActionRecord } from "@webcodex/proto";
import { principalFromHeaders, runMigrations } from "@webcodex/platform";
import type { Database } from "@webcodex/platform";
import { auditMigrations } from "./migrations.js";

export const AUDIT_SCHEMA = "audit";

export async function migrateAudit(db: Database): Promise<string[]> {
  return runMigrations(db, AUDIT_SCHEMA, auditMigrations);
}

const COLUMNS = 15;

/** Appends records idempotently by call_id in one statement; returns how many were new. */
export async function appendActions(db: Database, records: readonly ActionRecord[]): Promise<number> {
  if (records.length === 0) return 0;
  const values: unknown[] = [];
  const rows: string[] = [];
  records.forEach((r, i) => {
    const b = i * COLUMNS;
    rows.push(`(${Array.from({ length: COLUMNS }, (_, k) => `$${b + k + 1}`).join(",")})`);
    values.push(
      r.callId, r.clientId, r.subject, r.tool, r.projectCanonicalId || null, r.sessionId || null, r.effect, r.outcome,
      r.reasonCode || null, r.stateChanged, r.outcomeUnknown, r.inputNormalizationCode || null,
      new Date(Number(r.startedAtUnixMs)).toISOString(), r.durationUs, JSON.stringify(r.stageDurationsUs),
    );
  });
  const result = await db.query(
    `INSERT INTO ${AUDIT_SCHEMA}.action_audit (call_id, client_id, subject, tool, project_canonical_id, session_id, effect, outcome,
       reason_code, state_changed, outcome_unknown, input_normalization_code, started_at, duration_us, stage_durations_us)
     VALUES ${rows.join(",")} ON CONFLICT (call_id) DO NOTHING`,
    values,
  );
  return result.rowCount;
}

interface AuditRow {
  call_id: string; client_id: string; subject: string; tool: string; project_canonical_id: string | null; session_id: string | null;
  effect: string; outcome: string; reason_code: string | null; state_changed: boolean; outcome_unknown: boolean;
  input_normalization_code: string | null; started_at: Date | string; duration_us: number; stage_durations_us: Record<string, number> | string;
}

export function createAudit(deps: { db: Database }): ServiceImpl<typeof AuditService> {
  return {
    async recordActions(req) {
      return { accepted: await appendActions(deps.db, req.records) };
    },
    async listActions(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const limit = Math.min(Math.max(req.limit || 100, 1), 1000);
      const r = await deps.db.query<AuditRow>(
        `SELECT * FROM ${AUDIT_SCHEMA}.action_audit WHERE client_id=$1 ORDER BY started_at DESC, call_id LIMIT $2`,
        [principal.clientId, limit],
      );
      return {
        records: r.rows.map((row) => ({
          callId: row.call_id, clientId: row.client_id, subject: row.subject, tool: row.tool,
          projectCanonicalId: row.project_canonical_id ?? "", sessionId: row.session_id ?? "", effect: row.effect, outcome: row.outcome,
          reasonCode: row.reason_code ?? "", stateChanged: row.state_changed, outcomeUnknown: row.outcome_unknown,
          inputNormalizationCode: row.input_normalization_code ?? "", startedAtUnixMs: BigInt(new Date(row.started_at).getTime()),
          durationUs: row.duration_us,
          stageDurationsUs: typeof row.stage_durations_us === "string" ? JSON.parse(row.stage_durations_us) : row.stage_durations_us,
        })),
      };
    },
  };
}
