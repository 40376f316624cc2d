/**
 * Each provider run for real on fixture projects with known defects (and clean ones): the
 * results name the exact file, line and test. Plus the truthfulness rules: a killed run, a cut
 * output and an unknown format are never `passed`.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { createExecutor } from "../exec/index.js";
import { scrubbedBaseEnv } from "../exec/child-env.js";
import { cargoCheckStep, cargoTestStep, detect, goTestStep } from "./detect.js";
import type { Plan, Step } from "./detect.js";
import { runPlan, runStep } from "./engine.js";
import { FIXTURE_LINES, writeFixture, writeRustFailingTestOnly } from "./fixtures.js";
import type { FixtureKind } from "./fixtures.js";
import { parseEslint, parseNodeTestTap, parseTsc } from "./parsers.js";
import { probeValidationCapabilities } from "./probe.js";
import { runValidation, validationTerminal } from "./tools.js";
import type { CheckKind, StructuredValidation } from "./types.js";

const dirs: string[] = [];
after(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function tmp(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), "wc-validation-"));
  dirs.push(d);
  return d;
}
async function fixture(kind: FixtureKind, broken: boolean): Promise<string> {
  const root = await tmp();
  await writeFixture(kind, root, broken);
  return root;
}

const ALL_CAPS = new Set(["validation_node_v1", "validation_python_v1", "validation_go_v1", "validation_rust_v1"]);
const pytestAvailable = () => true;
function plan(root: string, checks: CheckKind[] = ["typecheck", "lint", "test"], caps: ReadonlySet<string> = ALL_CAPS): Plan {
  return detect({ root, checks, paths: [], capabilities: caps, pytest: pytestAvailable });
}
const check = (r: StructuredValidation, kind: CheckKind) => r.checks.find((c) => c.check === kind);
const single = (s: Step): Plan => ({ steps: [s], skipped: [], detected: [], notes: [] });

// A fresh CI machine gets these from `make test` (tools/scripts/ensure-toolchains.sh); a missing one fails here.
test("the validation toolchains are installed where the Runner's children look", async () => {
  const found = await probeValidationCapabilities(scrubbedBaseEnv().PATH as string);
  assert.deepEqual([...found].sort(), ["validationGo", "validationNode", "validationPython", "validationRust"]);
});

describe("TypeScript project (tsc, ESLint, node:test)", () => {
  test("a type error, a lint error and a failing test, each with file, line and test", async () => {
    const root = await fixture("node", true);
    const r = await runPlan(root, plan(root));
    assert.equal(r.status, "failed");
    assert.deepEqual(
      r.checks.map((c) => [c.check, c.status]),
      [
        ["typecheck", "failed"],
        ["lint", "failed"],
        ["test", "failed"],
      ],
    );
    const type = r.failures.find((f) => f.check === "typecheck");
    assert.deepEqual({ path: type?.path, line: type?.line, code: type?.code }, { path: "src/index.ts", line: FIXTURE_LINES.node.typeError, code: "TS2322" });
    const lint = r.failures.find((f) => f.check === "lint");
    assert.deepEqual(
      { path: lint?.path, line: lint?.line, code: lint?.code },
      { path: "src/util.js", line: FIXTURE_LINES.node.lintError, code: "no-unused-vars" },
    );
    const failing = r.failures.find((f) => f.check === "test");
    assert.deepEqual(
      { path: failing?.path, line: failing?.line, test: failing?.test },
      { path: "test/math.test.mjs", line: 4, test: FIXTURE_LINES.node.failingTest },
    );
    assert.deepEqual(check(r, "test")?.tests, { passed: 1, failed: 1, skipped: 0 });
    assert.equal(check(r, "typecheck")?.command_summary, "tsc --noEmit --pretty false -p tsconfig.json");
    assert.equal(r.truncated, false);
  });

  test("the same project without defects passes every check", async () => {
    const root = await fixture("node", false);
    const r = await runPlan(root, plan(root));
    assert.equal(r.status, "passed", JSON.stringify(r));
    assert.deepEqual(r.failures, []);
    assert.deepEqual(check(r, "test")?.tests, { passed: 2, failed: 0, skipped: 0 });
  });

  test("errors come before warnings", async () => {
    const root = await fixture("node", true);
    await writeFile(path.join(root, "src/warn.js"), "export function f() {\n  console.log(1);\n}\n");
    const r = await runPlan(root, plan(root, ["lint"]));
    const severities = r.failures.map((f) => f.severity ?? "error");
    assert.deepEqual(severities, ["error", "warning"]);
    assert.deepEqual(check(r, "lint")?.diagnostics, { errors: 1, warnings: 1 });
  });

  test("ambiguity is reported and only what is certain runs", async () => {
    const root = await fixture("node", false);
    await writeFile(path.join(root, "yarn.lock"), "");
    await writeFile(path.join(root, "package.json"), JSON.stringify({ name: "x", scripts: { test: "mocha" } }));
    const p = plan(root);
    assert.deepEqual(
      p.steps.map((s) => s.check),
      ["typecheck", "lint"],
    );
    assert.deepEqual(
      p.skipped.map((s) => [s.check, s.reason]),
      [["test", "test_runner_not_recognized"]],
    );
    assert.match(p.notes.join(" "), /package_manager_ambiguous: package-lock.json, yarn.lock/u);
  });

  test("a provider whose capability the Runner lacks is skipped, naming the capability", async () => {
    const root = await fixture("node", false);
    const r = await runPlan(root, plan(root, ["typecheck"], new Set()));
    assert.equal(r.status, "error");
    assert.deepEqual(r.skipped, [{ check: "typecheck", provider: "node", reason: "capability_missing", capability: "validation_node_v1" }]);
  });
});

describe("Python project (pytest --junitxml, unittest fallback)", () => {
  test("a failing test with file, line and test name", async () => {
    const root = await fixture("python", true);
    const r = await runPlan(root, plan(root));
    assert.equal(r.status, "failed");
    assert.deepEqual(check(r, "test")?.tests, { passed: 1, failed: 1, skipped: 0 });
    const f = r.failures[0];
    assert.deepEqual(
      { path: f?.path, line: f?.line, test: f?.test },
      { path: "tests/test_calc.py", line: FIXTURE_LINES.python.line, test: `tests.test_calc.CalcTest.${FIXTURE_LINES.python.failingTest}` },
    );
    assert.match(f?.message ?? "", /2 != 3/u);
  });

  test("without pytest, python -m unittest gives the same facts", async () => {
    const root = await fixture("python", true);
    const p = detect({ root, checks: ["test"], paths: [], capabilities: ALL_CAPS, pytest: () => false });
    const r = await runPlan(root, p);
    assert.equal(r.status, "failed");
    assert.deepEqual(check(r, "test")?.tests, { passed: 1, failed: 1, skipped: 0 });
    const f = r.failures[0];
    assert.deepEqual(
      { path: f?.path, line: f?.line, test: f?.test },
      { path: "tests/test_calc.py", line: FIXTURE_LINES.python.line, test: `tests.test_calc.CalcTest.${FIXTURE_LINES.python.failingTest}` },
    );
    assert.match(r.notes?.join(" ") ?? "", /pytest_not_installed/u);
  });

  test("a clean project passes", async () => {
    const root = await fixture("python", false);
    const r = await runPlan(root, plan(root));
    assert.equal(r.status, "passed", JSON.stringify(r));
  });
});

describe("Go module (go vet, go test -json)", () => {
  test("a vet finding and a failing test, each with file and line", async () => {
    const root = await fixture("go", true);
    const r = await runPlan(root, plan(root));
    assert.equal(r.status, "failed");
    assert.deepEqual(
      r.checks.map((c) => [c.check, c.status]),
      [
        ["lint", "failed"],
        ["test", "failed"],
      ],
    );
    const vet = r.failures.find((f) => f.check === "lint");
    assert.deepEqual({ path: vet?.path, line: vet?.line }, { path: "calc.go", line: FIXTURE_LINES.go.vetLine });
    assert.match(vet?.message ?? "", /Sprintf format %s/u);
    const t = r.failures.find((f) => f.check === "test");
    assert.deepEqual({ path: t?.path, line: t?.line, test: t?.test }, { path: "calc_test.go", line: 7, test: FIXTURE_LINES.go.failingTest });
    assert.deepEqual(check(r, "test")?.tests, { passed: 1, failed: 1, skipped: 0 });
  });

  test("go_test (with go's default vet) reports the vet finding as the build failure", async () => {
    const root = await fixture("go", true);
    const r = await runPlan(root, single(goTestStep(root, {})));
    assert.equal(r.status, "failed");
    assert.deepEqual({ path: r.failures[0]?.path, line: r.failures[0]?.line }, { path: "calc.go", line: FIXTURE_LINES.go.vetLine });
  });

  test("a clean module passes", async () => {
    const root = await fixture("go", false);
    const r = await runPlan(root, plan(root));
    assert.equal(r.status, "passed", JSON.stringify(r));
  });
});

describe("Rust crate (cargo check JSON, cargo test)", () => {
  test("cargo check: the type error with file, line, column and code", async () => {
    const root = await fixture("rust", true);
    const r = await runPlan(root, single(cargoCheckStep({})));
    assert.equal(r.status, "failed");
    const f = r.failures[0];
    assert.deepEqual({ path: f?.path, line: f?.line, code: f?.code }, { path: "src/lib.rs", line: FIXTURE_LINES.rust.typeErrorLine, code: "E0308" });
    assert.equal(r.failures.length, 1, "compiler summaries without a position are not failures");
  });

  test("cargo test: a failing test with its panic location, marked as the human format", async () => {
    const root = await tmp();
    await writeRustFailingTestOnly(root);
    const r = await runPlan(root, single(cargoTestStep({})));
    assert.equal(r.status, "failed");
    assert.equal(r.checks[0]?.format, "libtest_human");
    assert.deepEqual(r.checks[0]?.tests, { passed: 1, failed: 1, skipped: 0 });
    const f = r.failures[0];
    assert.deepEqual({ path: f?.path, line: f?.line, test: f?.test }, { path: "src/lib.rs", line: 11, test: FIXTURE_LINES.rust.failingTest });
  });

  test("cargo test on the crate with a type error reports the compile error", async () => {
    const root = await fixture("rust", true);
    const r = await runPlan(root, single(cargoTestStep({})));
    assert.equal(r.status, "failed");
    assert.deepEqual({ path: r.failures[0]?.path, line: r.failures[0]?.line }, { path: "src/lib.rs", line: FIXTURE_LINES.rust.typeErrorLine });
  });

  test("a clean crate passes project_validate", async () => {
    const root = await fixture("rust", false);
    const r = await runPlan(root, plan(root));
    assert.equal(r.status, "passed", JSON.stringify(r));
    assert.deepEqual(check(r, "test")?.tests, { passed: 2, failed: 0, skipped: 0 });
  });
});

test("a project that defines no validator: error, saying nothing was detected", async () => {
  const root = await tmp();
  await writeFile(path.join(root, "README.md"), "# nothing to validate\n");
  const r = await runPlan(root, plan(root));
  assert.deepEqual([r.status, r.detail], ["error", "nothing_detected"]);
  assert.deepEqual(r.checks, []);
  assert.match(r.notes?.join(" ") ?? "", /no validator is defined/u);
});

describe("truthful non-passed results", () => {
  const base = { root: "/p", cwd: "/p", stderr: "", signal: null, truncated: false };

  test("output in an unknown format is unparsed with a raw tail, never passed", async () => {
    const root = await tmp();
    const s: Step = { check: "test", provider: "node", argv: ["sh", "-c", "echo 'all good, trust me'"], command_summary: "x", parser: parseNodeTestTap };
    const { result } = await runStep(root, s);
    assert.equal(result.status, "unparsed");
    assert.equal(result.detail, "output_format_unknown");
    assert.match(result.raw_tail ?? "", /all good/u);
    assert.equal(parseEslint({ ...base, stdout: "not json", exitCode: 0 }).status, "unparsed");
  });

  test("cut output is never passed; problems seen in it still fail", () => {
    const tap = "TAP version 13\nok 1 - a\n1..1\n# tests 1\n# pass 1\n# fail 0\n";
    assert.equal(parseNodeTestTap({ ...base, stdout: tap, exitCode: 0 }).status, "passed");
    assert.equal(parseNodeTestTap({ ...base, stdout: tap, exitCode: 0, truncated: true }).status, "unparsed");
    assert.equal(parseTsc({ ...base, stdout: "", exitCode: 0, truncated: true }).status, "unparsed");
    const cut = parseTsc({ ...base, stdout: "a.ts(1,2): error TS1: bad\n", exitCode: 2, truncated: true });
    assert.deepEqual([cut.status, cut.detail], ["failed", "output_truncated"]);
    // A JSON report cut in the middle cannot be read at all.
    assert.equal(parseEslint({ ...base, stdout: '[{"filePath":"a.js","messages":[', exitCode: 0, truncated: true }).status, "unparsed");
  });

  test("a validator killed mid-run is error, whatever it printed before", async () => {
    const root = await tmp();
    const s: Step = {
      check: "test",
      provider: "node",
      argv: ["sh", "-c", "printf 'TAP version 13\\n# tests 0\\n# pass 0\\n# fail 0\\n'; kill -9 $$"],
      command_summary: "x",
      parser: parseNodeTestTap,
    };
    const { result } = await runStep(root, s);
    assert.deepEqual([result.status, result.detail], ["error", "killed"]);
  });

  test("a validation Job timed out mid-run is error timed_out, and its end replays", async () => {
    const root = await tmp();
    await writeFile(path.join(root, "package.json"), JSON.stringify({ scripts: { test: "node --test" } }));
    await writeFile(path.join(root, "slow.test.mjs"), 'import { test } from "node:test";\ntest("slow", () => new Promise((r) => setTimeout(r, 60_000)));\n');
    const executor = createExecutor({ root });
    try {
      const deps = { executor, capabilities: () => ["validationNode"] as const };
      const r = (await runValidation(
        deps,
        "project_validate",
        { checks: ["test"], paths: ["slow.test.mjs"], timeout_ms: 1_500, wait_ms: 100 },
        new AbortController().signal,
      )) as unknown as Record<string, unknown>;
      assert.equal(r["execution_state"], "pending");
      const done = (await executor.waitForJobTerminal({ job_id: r["job_id"] as string, wait_ms: 20_000 })) as unknown as Record<string, unknown>;
      assert.deepEqual([done["status"], done["detail"], done["state"]], ["error", "timed_out", "timed_out"]);
      assert.equal(done["stdout"], undefined, "raw output is not part of a validation result");
      assert.deepEqual(await executor.waitForJobTerminal({ job_id: r["job_id"] as string }), done);
    } finally {
      await executor.shutdown();
    }
  });

  test("a validation process that printed a cut or broken document is error, never passed", () => {
    const life = {
      execution_state: "completed",
      job_id: "job_1",
      state: "completed",
      exit_code: 0,
      signal: null,
      timed_out: false,
      stderr: "boom",
      stdout_bytes: 1,
      stderr_bytes: 4,
      truncated: false,
      duration_ms: 1,
      started_at: "t",
    } as const;
    const broken = validationTerminal({ ...life, stdout: '{"status":"passed","checks":[' }) as unknown as Record<string, unknown>;
    assert.deepEqual([broken["status"], broken["detail"], broken["raw_tail"]], ["error", "validator_crashed", "boom"]);
    const cut = validationTerminal({
      ...life,
      stdout: '{"status":"passed","checks":[],"failures":[],"truncated":false}',
      truncated: true,
      omitted_bytes: { stdout: 10, stderr: 0 },
    }) as unknown as Record<string, unknown>;
    assert.equal(cut["status"], "error");
  });

  test("arguments that would read as validator options or leave the project fail closed", async () => {
    const root = await tmp();
    const executor = createExecutor({ root });
    try {
      const deps = { executor, capabilities: () => [] as const };
      const signal = new AbortController().signal;
      await assert.rejects(
        runValidation(deps, "cargo_test", { test_filter: "--exact" }, signal),
        (e: Error & { failure?: { reason_code: string } }) => e.failure?.reason_code === "invalid_value",
      );
      await assert.rejects(
        runValidation(deps, "project_validate", { paths: ["../x"] }, signal),
        (e: Error & { failure?: { reason_code: string } }) => e.failure?.reason_code === "path_outside_project",
      );
      await assert.rejects(
        runValidation(deps, "go_test", { packages: ["-exec=sh"] }, signal),
        (e: Error & { failure?: { reason_code: string } }) => e.failure?.reason_code === "invalid_value",
      );
    } finally {
      await executor.shutdown();
    }
  });
});
