/** Audit ingest rate: ActionAudit rows per second into Postgres through the audit store's append path. */
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { ActionRecordSchema } from "@webcodex/proto";
import { appendActions, migrateAudit } from "@webcodex/audit";
import { argumentShape, createPostgresDatabase } from "@webcodex/platform";
import { round } from "./stats.js";
import type { BenchResult } from "./stats.js";

export async function benchAuditIngest(postgresUrl: string, rows = 20_000, batch = 500): Promise<BenchResult> {
  const db = createPostgresDatabase({ url: postgresUrl, max: 4 });
  try {
    await migrateAudit(db);
    const shape = argumentShape({ project: "~p1", files: [{ path: "README.md", start_line: 1 }] });
    const make = () =>
      create(ActionRecordSchema, {
        callId: randomUUID(),
        clientId: "bench",
        subject: "bench",
        tool: "read_files",
        projectCanonicalId: "agent:bench:p",
        effect: "read_only",
        outcome: "success",
        startedAtUnixMs: BigInt(Date.now()),
        durationUs: 1200,
        stageDurationsUs: { normalization: 20, resolution: 100, dispatch: 900, record: 50 },
        // A full production row: hashed argument shape and result sizes (see docs/audit.md).
        argumentShape: shape,
        resultSize: { canonicalBytes: 2400, projectedBytes: 1900, projectedMetadataBytes: 120 },
      });
    const t = performance.now();
    // Two concurrent writers, as two gateway replicas would be.
    const perWriter = rows / 2;
    await Promise.all(
      [0, 1].map(async () => {
        for (let i = 0; i < perWriter; i += batch) await appendActions(db, Array.from({ length: Math.min(batch, perWriter - i) }, make));
      }),
    );
    const seconds = (performance.now() - t) / 1000;
    return { name: "audit_ingest", metrics: { rows, batch, rows_per_second: round(rows / seconds, 0) }, notes: "target >= 5000 rows/s" };
  } finally {
    await db.close();
  }
}
