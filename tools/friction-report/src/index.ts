/**
 * The friction report as its own command (`webcodex-friction-report`, same flags as
 * `webcodex friction-report`). The analysis lives in @webcodex/audit, the owner of
 * friction analytics; this package is only the entry point.
 */
import { frictionReportUsage, runFrictionReport } from "@webcodex/audit";

export async function main(argv: readonly string[] = process.argv.slice(2)): Promise<void> {
  if (argv.includes("--help")) {
    process.stdout.write(`${frictionReportUsage}\n`);
    return;
  }
  await runFrictionReport(argv, { env: process.env, write: (text) => process.stdout.write(text) });
}
