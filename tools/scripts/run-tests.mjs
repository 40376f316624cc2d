#!/usr/bin/env node
// Runs every test suite with node's test runner and ends with one line "N passed, N failed"
// summing all of them. Exits non-zero if any test failed or any suite could not run.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";

const root = new URL("../../", import.meta.url).pathname;
const only = process.argv.slice(2);

function find(dir, pattern, out = []) {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    if (name === "node_modules") continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) find(p, pattern, out);
    else if (pattern.test(name)) out.push(p);
  }
  return out;
}

const distTests = (dirs) => dirs.flatMap((d) => find(join(root, d), /\.test\.js$/)).filter((p) => p.includes("/dist/"));
const suites = [
  { name: "unit", files: distTests(["libs", "services", "tools/cli", "tools/bench"]), concurrency: 2 },
  { name: "chart", files: find(join(root, "tools/chart"), /\.test\.mjs$/), concurrency: 1 },
  { name: "integration", files: distTests(["test/dist/integration"]), concurrency: 1 },
  { name: "e2e", files: distTests(["test/dist/e2e"]), concurrency: 1 },
  // Bounded samples here; `make faults` runs the long version (WEBCODEX_FAULTS_KILLS etc.).
  { name: "faults", files: distTests(["test/dist/faults"]), concurrency: 1 },
  { name: "security", files: distTests(["test/dist/security"]), concurrency: 1 },
].filter((s) => only.length === 0 || only.includes(s.name));

let passed = 0;
let failed = 0;
let broken = [];
const scratch = mkdtempSync(join(tmpdir(), "webcodex-tests-"));
for (const suite of suites) {
  if (suite.files.length === 0) {
    if (suite.name !== "chart") broken.push(`${suite.name}: no test files found`);
    continue;
  }
  process.stdout.write(`\n=== ${suite.name} (${suite.files.length} files)\n`);
  const counts = join(scratch, `${suite.name}.counts`);
  const res = spawnSync(
    process.execPath,
    [
      "--test",
      `--test-concurrency=${suite.concurrency}`,
      "--test-reporter=spec",
      "--test-reporter-destination=stdout",
      `--test-reporter=${join(root, "tools/scripts/count-reporter.mjs")}`,
      `--test-reporter-destination=${counts}`,
      ...suite.files,
    ],
    { stdio: "inherit", cwd: root, env: process.env },
  );
  if (!existsSync(counts)) {
    broken.push(`${suite.name}: the test runner exited (${res.status ?? res.signal}) without results`);
    continue;
  }
  const [p, f] = readFileSync(counts, "utf8").trim().split(" ").map(Number);
  if (!Number.isInteger(p) || !Number.isInteger(f)) {
    broken.push(`${suite.name}: the test runner's counts are unreadable (exit ${res.status ?? res.signal})`);
    continue;
  }
  passed += p;
  failed += f;
  if (res.status !== 0 && f === 0) broken.push(`${suite.name}: runner exited ${res.status} with no failed test (a file failed to load?)`);
}
for (const b of broken) process.stdout.write(`suite problem: ${b}\n`);
process.stdout.write(`\n${passed} passed, ${failed + broken.length} failed\n`);
process.exit(failed > 0 || broken.length > 0 ? 1 : 0);
