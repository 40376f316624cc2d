import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { detect } from "./detect.js";
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
