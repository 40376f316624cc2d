/**
 * Validation in a monorepo through a real MCP client (`webcodex dev`): one repository holding
 * npm workspaces (two packages, one failing), two Go modules joined by a go.work, a Cargo
 * workspace and a Python project in a subdirectory. project_validate, with and without paths,
 * names the failing package, file, line and test; go_test runs in a nested module; a bad package
 * pattern is `error` with a detail code; a package with no validator for the requested check is
 * not reported like a failed run.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { MONOREPO_FAILURES, monorepoFixtureFiles } from "@webcodex/runner/validation-fixtures";
import { callTool, openDevProject } from "../support/index.js";
import type { DevProject, ToolOutcome } from "../support/index.js";

type Row = Record<string, unknown>;
const KINDS = ["node", "go", "rust", "python"] as const;

describe("validation in a polyglot monorepo through a real MCP client", () => {
  let dev: DevProject;
  const runtime = async (tool: string, args: Row): Promise<ToolOutcome> => {
    let r = await callTool(dev.client, "call_runtime_tool", { tool, arguments: { project: dev.project, wait_ms: 30_000, ...args } });
    // A run still going at wait_ms is followed exactly as returned.
    while (r.result["execution_state"] === "pending") {
      const f = r.result["follow_up"] as { tool: string; arguments: Row };
      r = await callTool(dev.client, f.tool, f.arguments);
    }
    return r;
  };

  before(async () => {
    const files = Object.assign({}, ...KINDS.map((k) => monorepoFixtureFiles(k))) as Record<string, string>;
    dev = await openDevProject({ ...files, ".gitignore": "target\n" }, { name: "monorepo" });
  });
  after(async () => {
    await dev?.close();
  });

  it("without paths: every package runs in its own directory and each failing package names file, line and test", async () => {
    const r = await runtime("project_validate", { checks: ["test"] });
    assert.equal(r.isError, false, JSON.stringify(r.result));
    assert.equal(r.result["status"], "failed", JSON.stringify(r.result));
    const checks = r.result["checks"] as Row[];
    const failures = r.result["failures"] as Row[];
    for (const kind of KINDS) {
      const want = MONOREPO_FAILURES[kind];
      assert.equal(checks.find((c) => c["package"] === want.package)?.["status"], "failed", `${kind}: ${JSON.stringify(checks)}`);
      const f = failures.find((x) => x["package"] === want.package);
      assert.deepEqual([f?.["path"], f?.["line"]], [want.path, want.line], `${kind}: ${JSON.stringify(failures)}`);
      assert.ok(String(f?.["test"]).endsWith(want.test), `${kind}: ${String(f?.["test"])}`);
    }
    for (const ok of ["packages/good", "mods/ga", "crates/ra"])
      assert.equal(checks.find((c) => c["package"] === ok)?.["status"], "passed", `${ok} passed: ${JSON.stringify(checks)}`);
    assert.equal(r.result["exit_code"], undefined, "the verdict is status; no process exit code repeats it");
  });

  it("with paths: the nearest package above each path runs, and only it", async () => {
    for (const kind of KINDS) {
      const want = MONOREPO_FAILURES[kind];
      const r = await runtime("project_validate", { checks: ["test"], paths: [want.path] });
      assert.equal(r.result["status"], "failed", `${kind}: ${JSON.stringify(r.result)}`);
      assert.deepEqual([...new Set((r.result["checks"] as Row[]).map((c) => c["package"]))], [want.package]);
      const f = (r.result["failures"] as Row[])[0];
      assert.deepEqual([f?.["package"], f?.["path"], f?.["line"]], [want.package, want.path, want.line], JSON.stringify(r.result));
    }
  });

  it("go_test on a nested module runs there; a bad package pattern is error with its detail code", async () => {
    const nested = await runtime("go_test", { packages: ["./mods/gb/..."] });
    assert.equal(nested.result["status"], "failed", JSON.stringify(nested.result));
    const f = (nested.result["failures"] as Row[])[0];
    assert.deepEqual([f?.["path"], f?.["line"], f?.["test"]], [MONOREPO_FAILURES.go.path, MONOREPO_FAILURES.go.line, "TestSub"]);
    const passing = await runtime("go_test", { packages: ["./mods/ga/..."] });
    assert.equal(passing.result["status"], "passed", JSON.stringify(passing.result));

    const bad = await runtime("go_test", { packages: ["./nowhere/..."] });
    assert.equal(bad.isError, false, "a toolchain's refusal is a validation result, not a call failure");
    assert.equal(bad.result["status"], "error", JSON.stringify(bad.result));
    assert.equal((bad.result["checks"] as Row[])[0]?.["detail"], "go_package_outside_module", JSON.stringify(bad.result));
    assert.equal(bad.result["exit_code"], undefined);
    const missing = await runtime("go_test", { packages: ["./mods/ga/missing"] });
    assert.equal((missing.result["checks"] as Row[])[0]?.["detail"], "go_package_pattern_invalid", JSON.stringify(missing.result));
  });

  it("cargo_test finds the workspace and names the failing test; an unknown package is cargo_package_not_found", async () => {
    const r = await runtime("cargo_test", { package: "rb" });
    assert.equal(r.result["status"], "failed", JSON.stringify(r.result));
    const f = (r.result["failures"] as Row[])[0];
    assert.deepEqual([f?.["path"], f?.["line"], f?.["test"]], [MONOREPO_FAILURES.rust.path, MONOREPO_FAILURES.rust.line, MONOREPO_FAILURES.rust.test]);
    const unknown = await runtime("cargo_check", { package: "nope" });
    assert.deepEqual([unknown.result["status"], (unknown.result["checks"] as Row[])[0]?.["detail"]], ["error", "cargo_package_not_found"]);
  });

  it("a package with no validator for the requested check is error nothing_detected, with no exit code or Job bookkeeping", async () => {
    const r = await runtime("project_validate", { paths: ["py/app"], checks: ["typecheck"] });
    assert.equal(r.isError, false);
    assert.deepEqual([r.result["status"], r.result["detail"], r.result["checks"]], ["error", "nothing_detected", []], JSON.stringify(r.result));
    for (const k of ["exit_code", "job_id", "execution_state", "duration_ms"]) assert.equal(r.result[k], undefined, `no ${k}`);
  });
});
