/** Renders a FrictionReport as a fixed-width table (per tenant and tool) or JSON. */
import type { FrictionReport } from "./analyze.js";

function table(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(headers), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

const detailText = (d: Record<string, string | number | string[]>) =>
  Object.entries(d)
    .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join("+") : String(v)}`)
    .join(" ");

/** Call ids a table cell shows per finding unless `--ids` asks for all of them. */
export const SHOWN_CALL_IDS = 3;

/** A finding's calls in one cell: the count, then the first few ids (all with `allIds`). */
export function callIdsText(callIds: readonly string[], allIds = false): string {
  if (allIds || callIds.length <= SHOWN_CALL_IDS) return `${callIds.length}: ${callIds.join(",")}`;
  return `${callIds.length}: ${callIds.slice(0, SHOWN_CALL_IDS).join(",")},… (+${callIds.length - SHOWN_CALL_IDS}; --ids for all)`;
}

export function renderFrictionTable(report: FrictionReport, options: { details?: boolean; allIds?: boolean } = {}): string {
  const out: string[] = [`friction report: ${report.records} calls in ${report.streams} caller streams, ${report.findings.length} findings`];
  if (report.summary.length === 0) return `${out[0]}\nno friction patterns found\n`;
  out.push(
    "",
    table(
      ["TENANT", "TOOL", "PATTERN", "FINDINGS", "CALLS"],
      report.summary.map((r) => [r.clientId, r.tool, r.pattern, String(r.count), String(r.calls)]),
    ),
  );
  if (options.details !== false) {
    out.push(
      "",
      table(
        ["TIME", "TENANT", "TOOL", "PATTERN", "DETAIL", "CALLS"],
        report.findings.map((f) => [
          new Date(f.startedAtMs).toISOString(),
          f.clientId,
          f.tool,
          f.pattern,
          detailText(f.detail),
          callIdsText(f.callIds, options.allIds === true),
        ]),
      ),
    );
  }
  return `${out.join("\n")}\n`;
}

export function renderFrictionJson(report: FrictionReport): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}
