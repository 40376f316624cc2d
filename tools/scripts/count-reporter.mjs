// A node:test reporter that writes "<passed> <failed>" for the run to its destination.
// Suites (describe) and todo tests are not counted; only tests are.
export default async function* countReporter(source) {
  let passed = 0;
  let failed = 0;
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    if (event.data.details?.type === "suite") continue;
    // A todo test documents known missing work; node does not fail the run for it either.
    if (event.data.todo !== undefined && event.data.todo !== false) continue;
    if (event.type === "test:pass") passed += 1;
    else failed += 1;
  }
  yield `${passed} ${failed}\n`;
}
