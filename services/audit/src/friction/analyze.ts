/**
 * Friction analytics over ActionAudit: the seed's "before Direct/Gateway/Retire decisions"
 * patterns, found from codes, sizes and hashed argument shapes only (never values). Pure:
 * records in, report out.
 *
 * A stream is one caller's calls in order: (client_id, subject, session_id) by started_at.
 * Patterns (each a finding with the call ids that make it up):
 * - schema_rejection_corrected: a schema rejection (normalization stage: unknown_field,
 *   invalid_value, missing_field, conflicting_alias) whose next call is the same tool, gets
 *   past normalization, and differs in shape by at most one leaf removed and one added (a
 *   renamed field, a retyped value, one field dropped or added; 0/0 is a value fix).
 * - failure_reread_retry: a failure after normalization, then one or more observation calls
 *   (read-only, not discovery), then the same tool on the same project with the identical
 *   shape. Chained repetitions of the loop are one finding with `iterations`.
 * - discovery_oversized: a successful contract-discovery call (list_tools,
 *   read_tool_manifest) whose result is at least `discoveryRatio` times, and
 *   `discoveryMinExcessBytes` larger than, the contract of the tool the caller selects next.
 * - metadata_dominated: a success whose model projection is at least `metadataMinBytes` and
 *   at least `metadataShare` duplicate/echo metadata.
 * - repeated_sequence: a block of 1..4 calls (tool + shape) repeated back to back at least
 *   `minRepeats` times, all succeeding: no failure or new shape shows a model decision.
 */
import { CallOutcome, PipelineStage } from "@webcodex/contracts";
import type { SettledCallOutcome } from "@webcodex/contracts";

export const FrictionPattern = {
  schemaRejectionCorrected: "schema_rejection_corrected",
  failureRereadRetry: "failure_reread_retry",
  discoveryOversized: "discovery_oversized",
  metadataDominated: "metadata_dominated",
  repeatedSequence: "repeated_sequence",
} as const;
export type FrictionPattern = (typeof FrictionPattern)[keyof typeof FrictionPattern];

/** One ActionAudit row as the analysis needs it. */
export interface FrictionRecord {
  callId: string;
  clientId: string;
  subject: string;
  sessionId: string;
  tool: string;
  projectCanonicalId: string;
  effect: string;
  outcome: SettledCallOutcome;
  reasonCode: string;
  failureStage: string;
  startedAtMs: number;
  shapeFingerprint?: string;
  shapeLeaves?: readonly string[];
  resultCanonicalBytes?: number;
  resultProjectedBytes?: number;
  resultMetadataBytes?: number;
}

/** Catalog facts the analysis needs (from libs/contracts by default, see store.ts). */
export interface FrictionCatalog {
  /** list_tools / read_tool_manifest: calls that return tool contracts. */
  isContractDiscovery(tool: string): boolean;
  /** A read-only call that observes the workspace (what a re-read is). */
  isObservation(tool: string): boolean;
  /** Bytes of one tool's contract (name, description, input schema); undefined if unknown. */
  contractBytes(tool: string): number | undefined;
}

export interface FrictionThresholds {
  /** Calls further apart than this are not one interaction (ms). */
  maxGapMs: number;
  discoveryRatio: number;
  discoveryMinExcessBytes: number;
  metadataMinBytes: number;
  metadataShare: number;
  minRepeats: number;
  maxSequenceLength: number;
}

export const defaultFrictionThresholds: FrictionThresholds = {
  maxGapMs: 10 * 60_000,
  discoveryRatio: 4,
  discoveryMinExcessBytes: 1024,
  metadataMinBytes: 256,
  metadataShare: 0.5,
  minRepeats: 3,
  maxSequenceLength: 4,
};

export interface FrictionFinding {
  pattern: FrictionPattern;
  clientId: string;
  subject: string;
  sessionId: string;
  /** The tool the finding is about (the rejected/retried/discovered-for/repeated one). */
  tool: string;
  startedAtMs: number;
  callIds: string[];
  /** Codes and sizes that explain the finding; never values. */
  detail: Record<string, string | number | string[]>;
}

export interface FrictionSummaryRow {
  clientId: string;
  tool: string;
  pattern: FrictionPattern;
  count: number;
  /** Calls involved in these findings. */
  calls: number;
}

export interface FrictionReport {
  records: number;
  streams: number;
  thresholds: FrictionThresholds;
  /** Per tenant and tool. */
  summary: FrictionSummaryRow[];
  findings: FrictionFinding[];
}

const SCHEMA_REJECTIONS = new Set(["unknown_field", "invalid_value", "missing_field", "conflicting_alias"]);
const PRE_EXECUTION_STAGES = new Set<string>([PipelineStage.admission, PipelineStage.normalization]);

const isSchemaRejection = (r: FrictionRecord) =>
  r.outcome === CallOutcome.failure && r.failureStage === PipelineStage.normalization && SCHEMA_REJECTIONS.has(r.reasonCode);
const passedNormalization = (r: FrictionRecord) => r.outcome === CallOutcome.success || !PRE_EXECUTION_STAGES.has(r.failureStage);
const signature = (r: FrictionRecord) => `${r.tool}\u0000${r.shapeFingerprint ?? ""}`;

function finding(pattern: FrictionPattern, tool: string, calls: readonly FrictionRecord[], detail: FrictionFinding["detail"]): FrictionFinding {
  const first = calls[0] as FrictionRecord;
  return {
    pattern,
    clientId: first.clientId,
    subject: first.subject,
    sessionId: first.sessionId,
    tool,
    startedAtMs: first.startedAtMs,
    callIds: calls.map((c) => c.callId),
    detail,
  };
}

function streamsOf(records: readonly FrictionRecord[]): FrictionRecord[][] {
  const streams = new Map<string, FrictionRecord[]>();
  for (const r of records) {
    const key = `${r.clientId}\u0000${r.subject}\u0000${r.sessionId}`;
    let s = streams.get(key);
    if (!s) streams.set(key, (s = []));
    s.push(r);
  }
  for (const s of streams.values()) s.sort((a, b) => a.startedAtMs - b.startedAtMs || (a.callId < b.callId ? -1 : a.callId > b.callId ? 1 : 0));
  return [...streams.values()];
}

function schemaRejections(stream: readonly FrictionRecord[], t: FrictionThresholds): FrictionFinding[] {
  const out: FrictionFinding[] = [];
  for (let i = 0; i + 1 < stream.length; i++) {
    const a = stream[i] as FrictionRecord,
      b = stream[i + 1] as FrictionRecord;
    if (!isSchemaRejection(a) || b.tool !== a.tool || !passedNormalization(b) || b.startedAtMs - a.startedAtMs > t.maxGapMs) continue;
    if (!a.shapeLeaves || !b.shapeLeaves) continue;
    const before = new Set(a.shapeLeaves),
      after = new Set(b.shapeLeaves);
    const removed = [...before].filter((l) => !after.has(l)).length;
    const added = [...after].filter((l) => !before.has(l)).length;
    if (removed > 1 || added > 1) continue;
    out.push(
      finding(FrictionPattern.schemaRejectionCorrected, a.tool, [a, b], {
        reason_code: a.reasonCode,
        correction: removed === 1 && added === 1 ? "field_renamed_or_retyped" : removed === 1 ? "field_removed" : added === 1 ? "field_added" : "value_changed",
      }),
    );
  }
  return out;
}

function retryLoops(stream: readonly FrictionRecord[], catalog: FrictionCatalog, t: FrictionThresholds): FrictionFinding[] {
  const out: FrictionFinding[] = [];
  let i = 0;
  while (i < stream.length) {
    const f = stream[i] as FrictionRecord;
    if (f.outcome !== CallOutcome.failure || PRE_EXECUTION_STAGES.has(f.failureStage) || !f.shapeFingerprint) {
      i++;
      continue;
    }
    // Follow fail → read(s) → identical retry, as long as the retry fails again and loops.
    const calls: FrictionRecord[] = [f];
    let iterations = 0,
      at = i,
      last = f;
    for (;;) {
      let j = at + 1;
      const reads: FrictionRecord[] = [];
      while (j < stream.length && catalog.isObservation((stream[j] as FrictionRecord).tool) && (stream[j] as FrictionRecord).tool !== f.tool)
        reads.push(stream[j++] as FrictionRecord);
      const r = stream[j];
      const prev = reads[reads.length - 1] ?? last;
      if (
        reads.length === 0 ||
        !r ||
        r.tool !== f.tool ||
        r.projectCanonicalId !== f.projectCanonicalId ||
        r.shapeFingerprint !== f.shapeFingerprint ||
        r.startedAtMs - prev.startedAtMs > t.maxGapMs
      )
        break;
      calls.push(...reads, r);
      iterations += 1;
      at = j;
      last = r;
      if (r.outcome !== CallOutcome.failure || PRE_EXECUTION_STAGES.has(r.failureStage)) break;
    }
    if (iterations === 0) {
      i++;
      continue;
    }
    out.push(
      finding(FrictionPattern.failureRereadRetry, f.tool, calls, {
        reason_code: f.reasonCode,
        iterations,
        final_outcome: last.outcome,
        rereads: [...new Set(calls.filter((c) => c.tool !== f.tool).map((c) => c.tool))],
      }),
    );
    i = at + 1;
  }
  return out;
}

function oversizedDiscovery(stream: readonly FrictionRecord[], catalog: FrictionCatalog, t: FrictionThresholds): FrictionFinding[] {
  const out: FrictionFinding[] = [];
  for (let i = 0; i < stream.length; i++) {
    const d = stream[i] as FrictionRecord;
    if (d.outcome !== CallOutcome.success || !catalog.isContractDiscovery(d.tool)) continue;
    const resultBytes = d.resultProjectedBytes ?? d.resultCanonicalBytes;
    if (resultBytes === undefined) continue;
    let j = i + 1;
    while (j < stream.length && catalog.isContractDiscovery((stream[j] as FrictionRecord).tool)) j++;
    const selected = stream[j];
    if (!selected || selected.startedAtMs - d.startedAtMs > t.maxGapMs) continue;
    const contract = catalog.contractBytes(selected.tool);
    if (contract === undefined || resultBytes < contract * t.discoveryRatio || resultBytes - contract < t.discoveryMinExcessBytes) continue;
    out.push(
      finding(FrictionPattern.discoveryOversized, d.tool, [d, selected], {
        selected_tool: selected.tool,
        result_bytes: resultBytes,
        contract_bytes: contract,
        ratio: Math.round((resultBytes / contract) * 10) / 10,
      }),
    );
  }
  return out;
}

function metadataDominated(stream: readonly FrictionRecord[], t: FrictionThresholds): FrictionFinding[] {
  const out: FrictionFinding[] = [];
  for (const r of stream) {
    if (r.outcome !== CallOutcome.success || r.resultProjectedBytes === undefined || r.resultMetadataBytes === undefined) continue;
    if (r.resultProjectedBytes < t.metadataMinBytes || r.resultMetadataBytes < r.resultProjectedBytes * t.metadataShare) continue;
    out.push(
      finding(FrictionPattern.metadataDominated, r.tool, [r], {
        projected_bytes: r.resultProjectedBytes,
        metadata_bytes: r.resultMetadataBytes,
        share: Math.round((r.resultMetadataBytes / r.resultProjectedBytes) * 100) / 100,
      }),
    );
  }
  return out;
}

function repeatedSequences(stream: readonly FrictionRecord[], t: FrictionThresholds): FrictionFinding[] {
  const out: FrictionFinding[] = [];
  const sig = stream.map(signature);
  const ok = stream.map((r) => r.outcome === CallOutcome.success && r.shapeFingerprint !== undefined);
  let i = 0;
  while (i < stream.length) {
    let best: { k: number; reps: number } | undefined;
    for (let k = 1; k <= t.maxSequenceLength && i + k <= stream.length; k++) {
      let reps = 0;
      for (;;) {
        const base = i + reps * k;
        if (base + k > stream.length) break;
        let same = true;
        for (let m = 0; m < k && same; m++) {
          const at = base + m;
          same =
            ok[at] === true &&
            sig[at] === sig[i + m] &&
            (at === i || (stream[at] as FrictionRecord).startedAtMs - (stream[at - 1] as FrictionRecord).startedAtMs <= t.maxGapMs);
        }
        if (!same) break;
        reps += 1;
      }
      if (reps >= t.minRepeats && (!best || reps * k > best.reps * best.k)) best = { k, reps };
    }
    if (!best) {
      i++;
      continue;
    }
    const calls = stream.slice(i, i + best.k * best.reps);
    const sequence = calls.slice(0, best.k).map((c) => c.tool);
    out.push(finding(FrictionPattern.repeatedSequence, sequence[0] as string, calls, { sequence, repeats: best.reps }));
    i += best.k * best.reps;
  }
  return out;
}

export function analyzeFriction(records: readonly FrictionRecord[], catalog: FrictionCatalog, thresholds: Partial<FrictionThresholds> = {}): FrictionReport {
  const t = { ...defaultFrictionThresholds, ...thresholds };
  const streams = streamsOf(records);
  const findings = streams.flatMap((s) => [
    ...schemaRejections(s, t),
    ...retryLoops(s, catalog, t),
    ...oversizedDiscovery(s, catalog, t),
    ...metadataDominated(s, t),
    ...repeatedSequences(s, t),
  ]);
  findings.sort((a, b) => a.startedAtMs - b.startedAtMs || a.pattern.localeCompare(b.pattern));
  const rows = new Map<string, FrictionSummaryRow>();
  for (const f of findings) {
    const key = `${f.clientId}\u0000${f.tool}\u0000${f.pattern}`;
    const row = rows.get(key) ?? { clientId: f.clientId, tool: f.tool, pattern: f.pattern, count: 0, calls: 0 };
    row.count += 1;
    row.calls += f.callIds.length;
    rows.set(key, row);
  }
  const summary = [...rows.values()].sort((a, b) => a.clientId.localeCompare(b.clientId) || a.tool.localeCompare(b.tool) || a.pattern.localeCompare(b.pattern));
  return { records: records.length, streams: streams.length, thresholds: t, summary, findings };
}
