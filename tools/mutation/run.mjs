#!/usr/bin/env node
// `make mutation [M=name,...]`: StrykerJS over the safety-critical modules (tools/mutation/modules.mjs).
// Each module runs in its own Stryker sandbox, a copy of its package (src and the built dist):
// Stryker writes every mutant into the source at once (switched on by an environment variable),
// esbuild compiles just the mutated files over their dist counterparts, and Stryker's command
// runner runs `node --test` on the module's compiled unit tests once per mutant. Prints each
// module's score and every surviving mutant; writes bench-results/mutation.json; fails when the
// total score is under MUTATION_BREAK (default 90). `--report` prints the last reports again.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { MODULES } from "./modules.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const stryker = path.join(here, "node_modules/@stryker-mutator/core/bin/stryker.js");
const esbuild = path.join(root, "node_modules/esbuild/bin/esbuild");
const breakAt = Number(process.env.MUTATION_BREAK ?? 90);
const concurrency = Number(process.env.MUTATION_CONCURRENCY ?? Math.max(1, os.availableParallelism()));
const outDir = path.join(root, "bench-results");
const wanted = (process.env.M ?? "")
  .split(",")
  .map((s) => s.trim())
  .filter((s) => s !== "");

if (!existsSync(stryker)) {
  process.stderr.write("mutation: StrykerJS is not installed; run `make mutation` (it installs tools/mutation)\n");
  process.exit(2);
}
const unknown = wanted.filter((w) => !MODULES.some((m) => m.name === w));
if (unknown.length > 0) {
  process.stderr.write(`mutation: no module ${unknown.join(", ")}; known: ${MODULES.map((m) => m.name).join(", ")}\n`);
  process.exit(2);
}
const modules = wanted.length === 0 ? MODULES : MODULES.filter((m) => wanted.includes(m.name));

/** `file:first-last` ranges of the named top-level functions (Stryker's mutate range syntax). */
function functionRanges(file, names) {
  const text = readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const ranges = [];
  for (const name of names) {
    const node = source.statements.find((s) => ts.isFunctionDeclaration(s) && s.name?.text === name);
    if (node === undefined) throw new Error(`mutation: ${file} has no function ${name}`);
    const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    const last = source.getLineAndCharacterOfPosition(node.getEnd()).line + 1;
    ranges.push(`${first}-${last}`);
  }
  return ranges;
}

function runModule(mod) {
  const pkgDir = path.join(root, mod.pkg);
  const missing = mod.tests.filter((t) => !existsSync(path.join(pkgDir, t)));
  if (missing.length > 0) throw new Error(`mutation: ${mod.name}: tests not built: ${missing.join(", ")} (run make build)`);
  const mutate = mod.mutate.flatMap((f) => (mod.functions ? functionRanges(path.join(pkgDir, f), mod.functions).map((r) => `${f}:${r}`) : [f]));
  const report = path.join(outDir, "mutation", `${mod.name}.json`);
  const build = [
    esbuild,
    ...mod.mutate,
    "--outbase=src",
    "--outdir=dist",
    "--format=esm",
    "--platform=node",
    "--target=node20",
    "--sourcemap",
    "--log-level=warning",
  ].join(" ");
  const config = {
    testRunner: "command",
    // Each test file run directly (node:test runs it in this process, one Node start per file
    // rather than two as under --test); the first failing file ends the run.
    commandRunner: { command: mod.tests.map((t) => `node --test-reporter=dot ${t}`).join(" && ") },
    buildCommand: build,
    mutate,
    // The sandbox holds the package alone; its tsconfig would extend a base two levels up that
    // the sandbox does not have (esbuild then finds the package's own, above the sandbox).
    ignorePatterns: ["/tsconfig.json", "/stryker.conf.json"],
    reporters: ["json", "progress"],
    jsonReporter: { fileName: report },
    concurrency,
    timeoutMS: 20_000,
    timeoutFactor: 2,
    tempDirName: ".stryker-tmp",
    cleanTempDir: "always",
    disableTypeChecks: false,
    logLevel: "warn",
  };
  const configFile = path.join(os.tmpdir(), `webcodex-stryker-${process.pid}-${mod.name}.json`);
  writeFileSync(configFile, JSON.stringify(config, null, 2));
  process.stdout.write(`\n== ${mod.name} (${mod.what}): ${mutate.join(", ")} against ${mod.tests.join(", ")}\n`);
  const started = Date.now();
  const res = spawnSync(process.execPath, [stryker, "run", configFile], { cwd: pkgDir, stdio: "inherit" });
  rmSync(configFile, { force: true });
  rmSync(path.join(pkgDir, ".stryker-tmp"), { recursive: true, force: true });
  if (res.status !== 0) throw new Error(`mutation: ${mod.name}: stryker exited ${res.status}`);
  return { report: JSON.parse(readFileSync(report, "utf8")), seconds: Math.round((Date.now() - started) / 1000) };
}

const DETECTED = new Set(["Killed", "Timeout"]);
const UNDETECTED = new Set(["Survived", "NoCoverage"]);
mkdirSync(path.join(outDir, "mutation"), { recursive: true });
const summary = [];
const survivors = [];
// --report: no run; the score and survivors of each module's last report in bench-results/mutation/.
const reportOnly = process.argv.includes("--report");
for (const mod of modules) {
  const saved = path.join(outDir, "mutation", `${mod.name}.json`);
  if (reportOnly && !existsSync(saved)) continue;
  const { report, seconds } = reportOnly ? { report: JSON.parse(readFileSync(saved, "utf8")), seconds: 0 } : runModule(mod);
  const counts = {};
  for (const [file, { source, mutants }] of Object.entries(report.files)) {
    const lines = source.split("\n");
    for (const m of mutants) {
      counts[m.status] = (counts[m.status] ?? 0) + 1;
      if (!UNDETECTED.has(m.status)) continue;
      const { start, end } = m.location;
      const original =
        start.line === end.line
          ? (lines[start.line - 1] ?? "").slice(start.column - 1, end.column - 1)
          : `${(lines[start.line - 1] ?? "").slice(start.column - 1)}…`;
      survivors.push({
        module: mod.name,
        at: `${path.join(mod.pkg, file)}:${start.line}:${start.column}`,
        mutator: m.mutatorName,
        status: m.status,
        original: original.trim().slice(0, 120),
        replacement: (m.replacement ?? "").replace(/\s+/g, " ").trim().slice(0, 120),
      });
    }
  }
  const detected = [...DETECTED].reduce((n, s) => n + (counts[s] ?? 0), 0);
  const undetected = [...UNDETECTED].reduce((n, s) => n + (counts[s] ?? 0), 0);
  summary.push({
    module: mod.name,
    detected,
    undetected,
    score: detected + undetected === 0 ? 100 : (100 * detected) / (detected + undetected),
    counts,
    seconds,
  });
}

const detected = summary.reduce((n, s) => n + s.detected, 0);
const undetected = summary.reduce((n, s) => n + s.undetected, 0);
const total = detected + undetected === 0 ? 100 : (100 * detected) / (detected + undetected);
process.stdout.write("\nmutation score by module (killed + timed out) / (killed + timed out + survived + no coverage):\n");
for (const s of summary) {
  const other = Object.entries(s.counts)
    .filter(([k]) => !DETECTED.has(k) && !UNDETECTED.has(k))
    .map(([k, v]) => `${v} ${k}`)
    .join(", ");
  process.stdout.write(
    `  ${s.module.padEnd(18)} ${s.score.toFixed(1).padStart(5)}%  ${s.detected} detected, ${s.undetected} survived${other ? `, ${other}` : ""} (${s.seconds} s)\n`,
  );
}
process.stdout.write(`  ${"total".padEnd(18)} ${total.toFixed(1).padStart(5)}%  ${detected} detected, ${undetected} survived\n`);
if (survivors.length > 0) {
  process.stdout.write("\nsurvivors:\n");
  for (const s of survivors)
    process.stdout.write(`  ${s.at} ${s.mutator}${s.status === "NoCoverage" ? " (no coverage)" : ""}: ${s.original} -> ${s.replacement}\n`);
}
if (!reportOnly)
  writeFileSync(path.join(outDir, "mutation.json"), `${JSON.stringify({ score: total, detected, undetected, modules: summary, survivors }, null, 2)}\n`);
if (wanted.length === 0 && !reportOnly && total < breakAt) {
  process.stderr.write(`mutation: total score ${total.toFixed(1)}% is under ${breakAt}%\n`);
  process.exit(1);
}
