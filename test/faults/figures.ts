/** Fault-suite figures, merged into bench-results/faults.json when WEBCODEX_FAULTS_REPORT=1 (`make faults`). */
import { mkdir, readFile, rename, rmdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { repoRoot } from "../support/processes.js";

/**
 * Replaces one section of bench-results/faults.json, keeping every other section. Parts of the
 * suite may run as separate processes at once, so the read-merge-write is done under a lock
 * directory and the file is replaced atomically.
 */
export async function recordFigures(section: string, figures: object): Promise<void> {
  if (process.env["WEBCODEX_FAULTS_REPORT"] !== "1") return;
  const file = join(repoRoot, "bench-results/faults.json");
  await mkdir(dirname(file), { recursive: true });
  const lock = `${file}.lock`;
  for (let tries = 0; ; tries++) {
    try {
      await mkdir(lock);
      break;
    } catch (error) {
      // A lock older than any write (a process killed while holding it) is taken over after 10 s.
      if (tries > 500) break;
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      await sleep(20);
    }
  }
  try {
    let current: Record<string, unknown> = {};
    try {
      current = JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>;
    } catch {
      // first run
    }
    current[section] = { ...figures, measured_at: new Date().toISOString() };
    await writeFile(`${file}.tmp-${process.pid}`, JSON.stringify(current, null, 2) + "\n");
    await rename(`${file}.tmp-${process.pid}`, file);
  } finally {
    await rmdir(lock).catch(() => undefined);
  }
}
