/** Reads ActionAudit rows for friction analysis, and the catalog facts it needs. */
import { CallOutcome, callOutcomeFromString, toolDefinition } from "@webcodex/contracts";
import type { Queryable } from "@webcodex/platform";
import { AUDIT_SCHEMA } from "../audit.js";
import type { FrictionCatalog, FrictionRecord } from "./analyze.js";

export interface FrictionQuery {
  sinceMs: number;
  untilMs: number;
  /** Only this tenant. */
  clientId?: string;
  /** Most rows read (newest kept); default 1,000,000. */
  limit?: number;
}

interface Row {
  call_id: string;
  client_id: string;
  subject: string;
  session_id: string | null;
  tool: string;
  project_canonical_id: string | null;
  effect: string;
  outcome: string;
  reason_code: string | null;
  failure_stage: string | null;
  started_ms: string | number;
  args_shape_fingerprint: string | null;
  args_shape_leaves: string[] | string | null;
  result_canonical_bytes: number | null;
  result_projected_bytes: number | null;
  result_metadata_bytes: number | null;
}

/** PGlite may return a text[] as its literal form. */
const textArray = (v: string[] | string | null): string[] | undefined =>
  v === null
    ? undefined
    : Array.isArray(v)
      ? v
      : v
          .replace(/^\{|\}$/g, "")
          .split(",")
          .filter((s) => s !== "");

export async function loadFrictionRecords(db: Queryable, q: FrictionQuery): Promise<FrictionRecord[]> {
  const params: unknown[] = [new Date(q.sinceMs).toISOString(), new Date(q.untilMs).toISOString(), q.limit ?? 1_000_000];
  const tenant = q.clientId !== undefined ? `AND client_id = $${params.push(q.clientId)}` : "";
  const r = await db.query<Row>(
    `SELECT * FROM (
       SELECT call_id, client_id, subject, session_id, tool, project_canonical_id, effect, outcome, reason_code, failure_stage,
              (extract(epoch from started_at) * 1000)::bigint AS started_ms, args_shape_fingerprint, args_shape_leaves,
              result_canonical_bytes, result_projected_bytes, result_metadata_bytes
         FROM ${AUDIT_SCHEMA}.action_audit
        WHERE started_at >= $1 AND started_at < $2 ${tenant}
        ORDER BY started_at DESC LIMIT $3) newest
     ORDER BY client_id, subject, session_id, started_ms, call_id`,
    params,
  );
  return r.rows.map((row) => {
    const leaves = textArray(row.args_shape_leaves);
    return {
      callId: row.call_id,
      clientId: row.client_id,
      subject: row.subject,
      sessionId: row.session_id ?? "",
      tool: row.tool,
      projectCanonicalId: row.project_canonical_id ?? "",
      effect: row.effect,
      outcome: callOutcomeFromString(row.outcome) === CallOutcome.success ? CallOutcome.success : CallOutcome.failure,
      reasonCode: row.reason_code ?? "",
      failureStage: row.failure_stage ?? "",
      startedAtMs: Number(row.started_ms),
      ...(row.args_shape_fingerprint !== null ? { shapeFingerprint: row.args_shape_fingerprint } : {}),
      ...(leaves ? { shapeLeaves: leaves } : {}),
      ...(row.result_canonical_bytes !== null ? { resultCanonicalBytes: row.result_canonical_bytes } : {}),
      ...(row.result_projected_bytes !== null ? { resultProjectedBytes: row.result_projected_bytes } : {}),
      ...(row.result_metadata_bytes !== null ? { resultMetadataBytes: row.result_metadata_bytes } : {}),
    };
  });
}

/**
 * Catalog facts from the current `toolDefinitions()`: contract discovery is a discovery tool
 * the gateway answers (list_tools, read_tool_manifest; call_runtime_tool is audited as the
 * inner call), an observation is any other read-only non-discovery tool, and a contract's
 * size is its manifest entry (name, description, input schema) as JSON.
 */
export function catalogFrictionFacts(): FrictionCatalog {
  return {
    isContractDiscovery: (tool) => {
      const def = toolDefinition(tool);
      return def !== undefined && def.category === "discovery" && def.execution === "gateway" && tool !== "call_runtime_tool";
    },
    isObservation: (tool) => {
      const def = toolDefinition(tool);
      return def !== undefined && def.effect === "read_only" && def.category !== "discovery";
    },
    contractBytes: (tool) => {
      const def = toolDefinition(tool);
      return def ? Buffer.byteLength(JSON.stringify({ name: def.name, description: def.description, inputSchema: def.inputSchema })) : undefined;
    },
  };
}
