import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { detect, nodeTestPaths } from "./detect.js";
import { CHECK_KINDS, CHECK_ORDER } from "./types.js";

test("the check kinds are listed in their run order", () => {
  assert.deepEqual(CHECK_KINDS, ["typecheck", "lint", "test", "build"]);
  assert.deepEqual(
    CHECK_KINDS.map((kind) => CHECK_ORDER[kind]),
    [0, 1, 2, 3],
  );
});

test("a plan runs its steps in check order, across providers, whatever order they were detected in", async () => {
  const root = await mkdtemp(path.join(os.tmpdir(), "wc-check-order-"));
  try {
    // go is detected before rust and lists build, lint, test; rust lists typecheck, build, test.
    await writeFile(path.join(root, "go.mod"), "module example.com/order\n\ngo 1.19\n");
    await writeFile(path.join(root, "Cargo.toml"), '[package]\nname = "order"\nversion = "0.1.0"\n');
    const plan = detect({
      root,
      checks: ["build", "test", "lint", "typecheck"],
      paths: [],
      capabilities: new Set(["validation_go_v1", "validation_rust_v1"]),
      pytest: () => false,
    });
    assert.deepEqual(
      plan.steps.map((s) => `${s.check}:${s.provider}`),
      ["typecheck:rust", "lint:go", "test:go", "test:rust", "build:go", "build:rust"],
    );
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test("node --test is given the test files below a requested directory, on every Node version", async () => {
  const root = await mkdtemp(path.join(os.tmpdir(), "wc-node-paths-"));
  try {
    const { mkdir } = await import("node:fs/promises");
    for (const d of ["test/unit", "src", "node_modules/dep/test", ".cache"]) await mkdir(path.join(root, d), { recursive: true });
    const files = ["test/unit/a.mjs", "test/b.test.js", "src/c.test.mjs", "src/d_test.cjs", "src/helper.js", "node_modules/dep/test/x.js", ".cache/e.test.js"];
    for (const f of files) await writeFile(path.join(root, f), "");
    assert.deepEqual(nodeTestPaths(root, ["."]), ["src/c.test.mjs", "src/d_test.cjs", "test/b.test.js", "test/unit/a.mjs"]);
    assert.deepEqual(nodeTestPaths(root, ["src", "test/b.test.js", "missing.test.js"]), [
      "src/c.test.mjs",
      "src/d_test.cjs",
      "test/b.test.js",
      "missing.test.js",
    ]);
    assert.deepEqual(nodeTestPaths(root, [".cache"]), [".cache/e.test.js"], "a requested directory is walked even when its name starts with a dot");
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
