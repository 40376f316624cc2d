// A node:test reporter that writes "<passed> <failed>" for the run to its destination, then one
// line per failed test ("<file>\t<name>"), so two runs of a suite can be compared.
// Suites (describe) and todo tests are not counted; only tests are.
import { relative } from "node:path";

export default async function* countReporter(source) {
  let passed = 0;
  const failures = [];
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    if (event.data.details?.type === "suite") continue;
    // A todo test documents known missing work; node does not fail the run for it either.
    if (event.data.todo !== undefined && event.data.todo !== false) continue;
    if (event.type === "test:pass") passed += 1;
    else failures.push(`${event.data.file ? relative(process.cwd(), event.data.file) : "?"}\t${event.data.name}`);
  }
  yield `${passed} ${failures.length}\n${failures.map((f) => `${f}\n`).join("")}`;
}
