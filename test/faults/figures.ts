/** Fault-suite figures, merged into bench-results/faults.json when WEBCODEX_FAULTS_REPORT=1 (`make faults`). */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { repoRoot } from "../support/processes.js";

export async function recordFigures(section: string, figures: object): Promise<void> {
  if (process.env["WEBCODEX_FAULTS_REPORT"] !== "1") return;
  const file = join(repoRoot, "bench-results/faults.json");
  await mkdir(dirname(file), { recursive: true });
  let current: Record<string, unknown> = {};
  try {
    current = JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>;
  } catch {
    // first run
  }
  current[section] = { ...figures, measured_at: new Date().toISOString() };
  await writeFile(file, JSON.stringify(current, null, 2) + "\n");
}
