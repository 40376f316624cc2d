/**
 * `webcodex friction-report`: reads the audit store (Postgres by URL, or the embedded data
 * dir while `webcodex dev` is stopped) and prints the friction patterns per tenant and tool.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createPgliteDatabase, createPostgresDatabase } from "@webcodex/platform";
import type { Database, Env } from "@webcodex/platform";
import { analyzeFriction, defaultFrictionThresholds } from "./analyze.js";
import type { FrictionReport, FrictionThresholds } from "./analyze.js";
import { catalogFrictionFacts, loadFrictionRecords } from "./store.js";
import { renderFrictionJson, renderFrictionTable } from "./render.js";

export const frictionReportUsage = `usage: webcodex friction-report [--postgres-url URL | --data-dir DIR] [options]
  --postgres-url URL     the audit store (default: WEBCODEX_POSTGRES_URL)
  --data-dir DIR         the embedded data dir of a stopped \`webcodex dev\` instead
  --since ISO|Nd|Nh      window start (default: 7d ago)
  --until ISO            window end (default: now)
  --tenant CLIENT_ID     only this tenant
  --format table|json    output (default: table)
  --summary-only         table without the per-finding lines
  --ids                  every call id of a finding in the table (default: the count and the first 3)
  --discovery-ratio N    discovery result ≥ N × selected contract (default ${defaultFrictionThresholds.discoveryRatio})
  --metadata-share F     projection ≥ F metadata (default ${defaultFrictionThresholds.metadataShare})
  --min-repeats N        back-to-back repeats of a sequence (default ${defaultFrictionThresholds.minRepeats})`;

function parseTime(value: string | undefined, fallback: number, now: number): number {
  if (value === undefined) return fallback;
  const rel = /^(\d+)([dh])$/.exec(value);
  if (rel) return now - Number(rel[1]) * (rel[2] === "d" ? 86_400_000 : 3_600_000);
  const t = Date.parse(value);
  if (Number.isNaN(t)) throw new Error(`not a time: ${value}\n${frictionReportUsage}`);
  return t;
}

function positive(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number`);
  return n;
}

export interface FrictionReportIo {
  env: Env;
  write(text: string): void;
  now?: number;
}

/** Runs the command; returns the report it printed. */
export async function runFrictionReport(argv: readonly string[], io: FrictionReportIo): Promise<FrictionReport> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      "postgres-url": { type: "string" },
      "data-dir": { type: "string" },
      since: { type: "string" },
      until: { type: "string" },
      tenant: { type: "string" },
      format: { type: "string", default: "table" },
      "summary-only": { type: "boolean", default: false },
      ids: { type: "boolean", default: false },
      "discovery-ratio": { type: "string" },
      "metadata-share": { type: "string" },
      "min-repeats": { type: "string" },
    },
  });
  if (values.format !== "table" && values.format !== "json") throw new Error(`--format must be table or json\n${frictionReportUsage}`);
  const now = io.now ?? Date.now();
  const thresholds: Partial<FrictionThresholds> = {};
  const ratio = positive(values["discovery-ratio"], "--discovery-ratio");
  const share = positive(values["metadata-share"], "--metadata-share");
  const repeats = positive(values["min-repeats"], "--min-repeats");
  if (ratio !== undefined) thresholds.discoveryRatio = ratio;
  if (share !== undefined) thresholds.metadataShare = share;
  if (repeats !== undefined) thresholds.minRepeats = Math.max(2, Math.floor(repeats));

  const url = values["postgres-url"] ?? (values["data-dir"] === undefined ? io.env["WEBCODEX_POSTGRES_URL"] : undefined);
  let db: Database;
  if (url) db = createPostgresDatabase({ url, max: 2 });
  else if (values["data-dir"] !== undefined) db = await createPgliteDatabase(join(values["data-dir"], "postgres"));
  else throw new Error(`friction-report needs --postgres-url (or WEBCODEX_POSTGRES_URL) or --data-dir\n${frictionReportUsage}`);
  try {
    const records = await loadFrictionRecords(db, {
      sinceMs: parseTime(values.since, now - 7 * 86_400_000, now),
      untilMs: parseTime(values.until, now + 60_000, now),
      ...(values.tenant !== undefined ? { clientId: values.tenant } : {}),
    });
    const report = analyzeFriction(records, catalogFrictionFacts(), thresholds);
    io.write(values.format === "json" ? renderFrictionJson(report) : renderFrictionTable(report, { details: !values["summary-only"], allIds: values.ids }));
    return report;
  } finally {
    await db.close();
  }
}
