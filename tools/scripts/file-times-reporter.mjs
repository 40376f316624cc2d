// A node:test reporter that writes, for each test file, the summed duration of its top-level tests
// ("<ms>\t<file>" per line, slowest first), so a run can say which files its time went to.
import { relative } from "node:path";

export default async function* fileTimesReporter(source) {
  const times = new Map();
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    if (event.data.nesting !== 0 || !event.data.file) continue;
    const file = relative(process.cwd(), event.data.file);
    times.set(file, (times.get(file) ?? 0) + (event.data.details?.duration_ms ?? 0));
  }
  yield [...times]
    .sort((a, b) => b[1] - a[1])
    .map(([file, ms]) => `${Math.round(ms)}\t${file}\n`)
    .join("");
}
