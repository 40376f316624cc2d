/**
 * Validation follows a project's package structure: detection per requested path and up to the
 * nearest package root, and for the whole project through its workspace declarations; each
 * check runs in its package's directory and says which package it and its failures belong to.
 * The toolchains run for real on fixture monorepos.
 */
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { cargoCheckStep } from "./detect.js";
import { cargoPlan, detectProject, goTestPlan, MAX_PACKAGES } from "./plan.js";
import { runPlan } from "./engine.js";
import { MONOREPO_FAILURES, writeMonorepoFixture } from "./fixtures.js";
import type { FixtureKind } from "./fixtures.js";
import type { CheckKind } from "./types.js";
import { expandGlob, goWorkUses, nearestPackage, projectPackages } from "./workspace.js";

const dirs: string[] = [];
after(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function mono(kind: FixtureKind): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), `wc-mono-${kind}-`));
  dirs.push(d);
  await writeMonorepoFixture(kind, d);
  return d;
}
const CAPS = new Set(["validation_node_v1", "validation_python_v1", "validation_go_v1", "validation_rust_v1"]);
const validate = (root: string, paths: string[] = [], checks: CheckKind[] = ["test"]) =>
  runPlan(root, detectProject({ root, checks, paths, capabilities: CAPS, pytest: () => true }));

describe("package structure", () => {
  test("the nearest package root is found upwards from a path; the project's packages come from its declarations", async () => {
    const node = await mono("node");
    assert.deepEqual(nearestPackage(node, "packages/bad/test/sum.test.mjs"), { dir: "packages/bad", inner: "test/sum.test.mjs" });
    assert.deepEqual(nearestPackage(node, "packages/good"), { dir: "packages/good", inner: "." });
    assert.deepEqual(projectPackages(node), [".", "packages/bad", "packages/good"]);
    const go = await mono("go");
    assert.deepEqual(goWorkUses(go), ["./mods/ga", "./mods/gb"]);
    assert.deepEqual(projectPackages(go), ["mods/ga", "mods/gb"], "go.work alone does not make the root a package");
    assert.deepEqual(projectPackages(await mono("rust")), [".", "crates/ra", "crates/rb"]);
    assert.deepEqual(projectPackages(await mono("python")), ["py/app"], "a Python project is found by its pyproject.toml");
    assert.deepEqual(
      expandGlob(node, "packages/*").map((d) => path.relative(node, d)),
      ["packages/bad", "packages/good"],
    );
    assert.deepEqual(expandGlob(node, "../x"), [], "a glob never leaves the project");
  });

  test("pnpm-workspace.yaml and go.work single-line use are read", async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), "wc-mono-pnpm-"));
    dirs.push(root);
    await mkdir(path.join(root, "apps/web"), { recursive: true });
    await mkdir(path.join(root, "tool"), { recursive: true });
    await writeFile(path.join(root, "package.json"), "{}");
    await writeFile(path.join(root, "pnpm-workspace.yaml"), "packages:\n  - 'apps/*'\n  - \"!apps/ignored\"\n# comment\n");
    await writeFile(path.join(root, "apps/web/package.json"), "{}");
    await writeFile(path.join(root, "go.work"), "go 1.19\nuse ./tool\n");
    await writeFile(path.join(root, "tool/go.mod"), "module example.com/tool\n");
    assert.deepEqual(projectPackages(root), [".", "apps/web", "tool"]);
  });

  test("at most MAX_PACKAGES packages run; the rest are listed as skipped with why", async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), "wc-mono-many-"));
    dirs.push(root);
    await writeFile(path.join(root, "package.json"), JSON.stringify({ workspaces: ["p/*"] }));
    for (let i = 0; i < MAX_PACKAGES + 2; i++) {
      await mkdir(path.join(root, `p/m${String(i).padStart(2, "0")}`), { recursive: true });
      await writeFile(path.join(root, `p/m${String(i).padStart(2, "0")}/package.json`), JSON.stringify({ scripts: { build: "true" } }));
    }
    const plan = detectProject({ root, checks: ["build"], paths: [], capabilities: CAPS, pytest: () => true });
    assert.equal(new Set(plan.steps.map((s) => s.package)).size, MAX_PACKAGES - 1, "the root counts as one of the packages");
    const limited = plan.skipped.filter((s) => s.reason === "package_limit").map((s) => s.package);
    assert.deepEqual(limited, ["p/m07", "p/m08", "p/m09"]);
  });
});

describe("project_validate on monorepos (toolchains run for real)", () => {
  for (const kind of ["node", "go", "rust", "python"] as const) {
    const want = MONOREPO_FAILURES[kind];
    test(`${kind}: without paths every package runs in its directory; the failing package, file, line and test are named`, async () => {
      const root = await mono(kind);
      const r = await validate(root);
      assert.equal(r.status, "failed", JSON.stringify(r));
      const failing = r.checks.find((c) => c.status === "failed");
      assert.equal(failing?.package, want.package, JSON.stringify(r.checks));
      const f = r.failures[0];
      assert.deepEqual([f?.package, f?.path, f?.line], [want.package, want.path, want.line], JSON.stringify(r.failures));
      assert.ok(f?.test?.endsWith(want.test), `${String(f?.test)} names ${want.test}`);
      if (kind !== "python")
        assert.ok(
          r.checks.some((c) => c.package !== want.package && c.status === "passed"),
          "the other package passed",
        );
    });
    test(`${kind}: a path inside the failing package validates that package only`, async () => {
      const root = await mono(kind);
      const r = await validate(root, [path.posix.dirname(want.path)]);
      assert.equal(r.status, "failed", JSON.stringify(r));
      assert.deepEqual([...new Set(r.checks.map((c) => c.package))], [want.package]);
      assert.equal(r.failures[0]?.path, want.path);
    });
  }

  test("nothing detected is an error with a detail code, not a failed run", async () => {
    const root = await mono("python");
    const r = await validate(root, ["README.md"]);
    assert.deepEqual([r.status, r.detail, r.checks], ["error", "nothing_detected", []]);
  });
});

describe("go_test and cargo_* resolve their module or workspace root", () => {
  test("go_test on a nested module runs in that module; ./... covers every go.work module", async () => {
    const root = await mono("go");
    const nested = await runPlan(root, goTestPlan(root, { packages: ["./mods/gb/..."] }));
    assert.deepEqual([nested.status, nested.checks.map((c) => c.command_summary)], ["failed", ["go test -json ./..."]]);
    assert.deepEqual([nested.failures[0]?.path, nested.failures[0]?.test], [MONOREPO_FAILURES.go.path, "TestSub"]);
    const all = await runPlan(root, goTestPlan(root, {}));
    assert.deepEqual(
      all.checks.map((c) => [c.package, c.status]),
      [
        ["mods/ga", "passed"],
        ["mods/gb", "failed"],
      ],
    );
  });

  test("go usage errors are error with a detail code naming them, never unparsed", async () => {
    const root = await mono("go");
    const cases: Array<[string[], string]> = [
      [["./nowhere/..."], "go_package_outside_module"],
      [["./mods/ga/missing"], "go_package_pattern_invalid"],
    ];
    for (const [packages, detail] of cases) {
      const r = await runPlan(root, goTestPlan(root, { packages }));
      assert.deepEqual([r.status, r.checks[0]?.status, r.checks[0]?.detail], ["error", "error", detail], JSON.stringify(r));
      assert.ok(!JSON.stringify(r).includes(root), "messages are project-relative");
    }
    const none = await mono("python");
    const r = await runPlan(none, goTestPlan(none, {}));
    assert.equal(r.checks[0]?.detail, "go_module_not_found", JSON.stringify(r));
    await writeFile(path.join(root, "go.work"), "go 1.19\n\nuse (\n\t./mods/ga\n\t./mods/gone\n)\n");
    const member = await runPlan(root, goTestPlan(root, { packages: ["./mods/ga/..."] }));
    assert.equal(member.checks[0]?.detail, "go_workspace_member_missing", JSON.stringify(member));
  });

  test("cargo in a subdirectory workspace runs there; an unknown package is cargo_package_not_found", async () => {
    const outer = await mkdtemp(path.join(os.tmpdir(), "wc-mono-cargo-"));
    dirs.push(outer);
    await writeMonorepoFixture("rust", path.join(outer, "rs"));
    const ok = await runPlan(
      outer,
      cargoPlan(outer, () => cargoCheckStep({ package: "ra" }), "ra"),
    );
    assert.deepEqual([ok.status, ok.checks[0]?.package], ["passed", "rs"], JSON.stringify(ok));
    const bad = await runPlan(
      outer,
      cargoPlan(outer, () => cargoCheckStep({ package: "nope" }), "nope"),
    );
    assert.deepEqual([bad.status, bad.checks[0]?.detail], ["error", "cargo_package_not_found"], JSON.stringify(bad));
  });
});
