// The layering checks `make lint` runs fail on a new import cycle: a type-only one (the
// cycle script) and a runtime one (ESLint's import-x/no-cycle on the real config).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ESLint } from "eslint";

const root = new URL("../../../", import.meta.url).pathname;
const script = join(root, "tools/scripts/check-import-cycles.mjs");

test("the cycle check passes on the tree and fails on a type-only cycle", () => {
  const clean = spawnSync(process.execPath, [script], { cwd: root, encoding: "utf8" });
  assert.equal(clean.status, 0, clean.stderr);
  const dir = mkdtempSync(join(tmpdir(), "cycles-"));
  writeFileSync(join(dir, "a.ts"), 'import type { B } from "./b.js";\nexport interface A { b?: B }\n');
  writeFileSync(join(dir, "b.ts"), 'import type { A } from "./a.js";\nexport interface B { a?: A }\n');
  writeFileSync(join(dir, "c.ts"), 'import type { A } from "./a.js";\nexport type C = A;\n');
  const cyclic = spawnSync(process.execPath, [script, dir], { encoding: "utf8" });
  assert.equal(cyclic.status, 1);
  assert.match(cyclic.stderr, /import cycle \(2 files\): .*a\.ts ↔ .*b\.ts/u);
  assert.doesNotMatch(cyclic.stderr, /c\.ts/u);
});

test("ESLint reports a runtime import cycle introduced into libs/contracts", async () => {
  const eslint = new ESLint({ cwd: root });
  const filePath = join(root, "libs/contracts/src/compaction.ts");
  const source = readFileSync(filePath, "utf8");
  const [clean] = await eslint.lintText(source, { filePath });
  assert.deepEqual(
    clean?.messages.filter((m) => m.ruleId === "import-x/no-cycle"),
    [],
  );
  // catalog.ts imports compaction.ts; compaction.ts importing catalog.ts closes a cycle.
  const [cyclic] = await eslint.lintText(`import { toolDefinitions } from "./catalog.js";\nexport const definitions = toolDefinitions;\n${source}`, {
    filePath,
  });
  assert.equal(cyclic?.messages.filter((m) => m.ruleId === "import-x/no-cycle").length, 1);
});
