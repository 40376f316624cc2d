// A node:test reporter that writes "<passed> <failed> <skipped>" for the run to its destination,
// then one line per failed test ("<file>\t<name>"), so two runs of a suite can be compared, then
// one line per skipped test ("skip\t<file>\t<name>: <reason>"). Suites (describe) and todo tests
// are not counted; only tests are. A skipped test is not a passed one.
import { relative } from "node:path";

export default async function* countReporter(source) {
  let passed = 0;
  const failures = [];
  const skipped = [];
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    if (event.data.details?.type === "suite") continue;
    // A todo test documents known missing work; node does not fail the run for it either.
    if (event.data.todo !== undefined && event.data.todo !== false) continue;
    const where = event.data.file ? relative(process.cwd(), event.data.file) : "?";
    if (event.type === "test:pass" && event.data.skip !== undefined && event.data.skip !== false) {
      skipped.push(`skip\t${where}\t${event.data.name}${typeof event.data.skip === "string" ? `: ${event.data.skip}` : ""}`);
    } else if (event.type === "test:pass") passed += 1;
    else failures.push(`${where}\t${event.data.name}`);
  }
  yield `${passed} ${failures.length} ${skipped.length}\n${[...failures, ...skipped].map((f) => `${f}\n`).join("")}`;
}
