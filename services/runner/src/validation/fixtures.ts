/**
 * Test and bench support (not part of the public surface): small real projects per provider,
 * each with known defects when `broken` (and the same project without them otherwise). The
 * validators run for real on them; nothing here is captured output.
 */
import { mkdir, readFile, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";

export type FixtureKind = "node" | "python" | "go" | "rust";

async function writeTree(root: string, files: Record<string, string>): Promise<void> {
  for (const [rel, content] of Object.entries(files)) {
    const target = path.join(root, rel);
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, content);
  }
}

/** The directory holding this repository's installed typescript and eslint. */
export function sharedNodeModules(): string {
  const req = createRequire(import.meta.url);
  return path.dirname(path.dirname(req.resolve("typescript/package.json")));
}

/** Line numbers the broken fixtures' defects sit on (tests assert the exact positions). */
export const FIXTURE_LINES = {
  node: { typeError: 2, lintError: 2, failingTest: "adds numbers" },
  python: { failingTest: "test_add_fails", line: 6 },
  go: { vetLine: 6, failingTest: "TestAdd" },
  rust: { typeErrorLine: 2, failingTest: "tests::adds" },
} as const;

/** The fixture's files (without node_modules, which `writeFixture` links in for the node fixture). */
export function fixtureFiles(kind: FixtureKind, broken: boolean): Record<string, string> {
  switch (kind) {
    case "node":
      return {
        "package.json": JSON.stringify({ name: "fixture", private: true, type: "module", scripts: { test: "node --test" } }, null, 2),
        "package-lock.json": JSON.stringify({ name: "fixture", lockfileVersion: 3, requires: true, packages: {} }),
        "tsconfig.json": JSON.stringify({
          compilerOptions: { strict: true, target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", noEmit: true, types: [] },
          include: ["src/**/*.ts"],
        }),
        "eslint.config.js": 'export default [{ files: ["**/*.js", "**/*.mjs"], rules: { "no-unused-vars": "error", "no-console": "warn" } }];\n',
        "src/index.ts": broken
          ? 'export function total(a: number, b: number): number {\n  const label: number = "sum";\n  return a + b + label;\n}\n'
          : "export function total(a: number, b: number): number {\n  return a + b;\n}\n",
        "src/util.js": broken ? "export function unused() {\n  const leftover = 1;\n  return 2;\n}\n" : "export function used() {\n  return 2;\n}\n",
        "test/math.test.mjs": [
          'import { test } from "node:test";',
          'import assert from "node:assert/strict";',
          'test("adds numbers", () => {',
          `  assert.equal(1 + 1, ${broken ? 3 : 2});`,
          "});",
          'test("multiplies", () => {',
          "  assert.equal(2 * 3, 6);",
          "});",
          "",
        ].join("\n"),
      };
    case "python":
      return {
        "pyproject.toml": '[project]\nname = "fixture"\nversion = "0.1.0"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
        "calc.py": "def add(a, b):\n    return a + b\n",
        "tests/__init__.py": "",
        "tests/test_calc.py": [
          "import unittest",
          "from calc import add",
          "",
          "class CalcTest(unittest.TestCase):",
          `    def ${broken ? "test_add_fails" : "test_add"}(self):`,
          `        self.assertEqual(add(1, 1), ${broken ? 3 : 2})`,
          "",
          "    def test_add_zero(self):",
          "        self.assertEqual(add(0, 1), 1)",
          "",
        ].join("\n"),
      };
    case "go":
      return {
        "go.mod": "module example.com/fixture\n\ngo 1.19\n",
        "calc.go": [
          "package fixture",
          "",
          'import "fmt"',
          "",
          "func Describe(n int) string {",
          broken ? '\treturn fmt.Sprintf("%s items", n)' : '\treturn fmt.Sprintf("%d items", n)',
          "}",
          "",
          "func Add(a, b int) int { return a + b }",
          "",
        ].join("\n"),
        "calc_test.go": [
          "package fixture",
          "",
          'import "testing"',
          "",
          "func TestAdd(t *testing.T) {",
          `\tif Add(1, 1) != ${broken ? 3 : 2} {`,
          '\t\tt.Fatalf("Add(1, 1) = %d", Add(1, 1))',
          "\t}",
          "}",
          "",
          "func TestDescribe(t *testing.T) {",
          "\t_ = Describe(2)",
          "}",
          "",
        ].join("\n"),
      };
    case "rust":
      return {
        "Cargo.toml": '[package]\nname = "fixture"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n',
        "src/lib.rs": [
          "pub fn add(a: i32, b: i32) -> i32 {",
          broken ? '    let x: i32 = "two";' : "    let x: i32 = 0;",
          "    a + b + x",
          "}",
          "",
          "#[cfg(test)]",
          "mod tests {",
          "    use super::*;",
          "    #[test]",
          "    fn adds() {",
          `        assert_eq!(add(1, 1), ${broken ? 3 : 2});`,
          "    }",
          "    #[test]",
          "    fn adds_zero() {",
          "        assert_eq!(add(0, 1), 1);",
          "    }",
          "}",
          "",
        ].join("\n"),
      };
  }
}

export async function writeFixture(kind: FixtureKind, root: string, broken: boolean): Promise<void> {
  await writeTree(root, fixtureFiles(kind, broken));
  if (kind === "node") await symlink(sharedNodeModules(), path.join(root, "node_modules"), "dir");
}

/** A Rust crate that compiles but has a failing test (a type error would hide the tests). */
export async function writeRustFailingTestOnly(root: string): Promise<void> {
  await writeFixture("rust", root, false);
  const lib = path.join(root, "src/lib.rs");
  await writeFile(lib, (await readFile(lib, "utf8")).replace("assert_eq!(add(1, 1), 2)", "assert_eq!(add(1, 1), 3)"));
}

/**
 * Monorepos: two packages (one with a failing test) declared the way each toolchain declares
 * them (npm workspaces, go.work, a Cargo workspace), and a Python project in a subdirectory of
 * a repository with no Python files at its root. `MONOREPO_FAILURES` says where each fails.
 */
export const MONOREPO_FAILURES = {
  node: { package: "packages/bad", path: "packages/bad/test/sum.test.mjs", line: 4, test: "sums" },
  go: { package: "mods/gb", path: "mods/gb/calc_test.go", line: 7, test: "TestSub" },
  rust: { package: "crates/rb", path: "crates/rb/src/lib.rs", line: 9, test: "tests::subs" },
  python: { package: "py/app", path: "py/app/tests/test_calc.py", line: 6, test: "test_add_fails" },
} as const;

const nodeTest = (name: string, actual: string, expected: string) =>
  [
    'import { test } from "node:test";',
    'import assert from "node:assert/strict";',
    `test("${name}", () => {`,
    `  assert.equal(${actual}, ${expected});`,
    "});",
    "",
  ].join("\n");
const goTest = (pkg: string, name: string, cond: string) =>
  [`package ${pkg}`, "", 'import "testing"', "", `func ${name}(t *testing.T) {`, `\tif ${cond} {`, '\t\tt.Fatalf("wrong")', "\t}", "}", ""].join("\n");
const rustLib = (fn: string, op: string, test: string, expected: number) =>
  [
    `pub fn ${fn}(a: i32, b: i32) -> i32 {`,
    `    a ${op} b`,
    "}",
    "",
    "#[cfg(test)]",
    "mod tests {",
    "    use super::*;",
    "    #[test]",
    `    fn ${test}() { assert_eq!(${fn}(2, 1), ${expected}); }`,
    "}",
    "",
  ].join("\n");

export function monorepoFixtureFiles(kind: FixtureKind): Record<string, string> {
  const pkg = (name: string, extra: Record<string, unknown> = {}) => JSON.stringify({ name, private: true, type: "module", ...extra }, null, 2);
  switch (kind) {
    case "node":
      return {
        "package.json": pkg("mono", { workspaces: ["packages/*"] }),
        "packages/good/package.json": pkg("good", { scripts: { test: "node --test" } }),
        "packages/good/test/mul.test.mjs": nodeTest("multiplies", "2 * 3", "6"),
        "packages/bad/package.json": pkg("bad", { scripts: { test: "node --test" } }),
        "packages/bad/test/sum.test.mjs": nodeTest("sums", "1 + 1", "3"),
      };
    case "go":
      return {
        "go.work": "go 1.19\n\nuse (\n\t./mods/ga\n\t./mods/gb\n)\n",
        "mods/ga/go.mod": "module example.com/ga\n\ngo 1.19\n",
        "mods/ga/add.go": "package ga\n\nfunc Add(a, b int) int { return a + b }\n",
        "mods/ga/add_test.go": goTest("ga", "TestAdd", "Add(1, 1) != 2"),
        "mods/gb/go.mod": "module example.com/gb\n\ngo 1.19\n",
        "mods/gb/calc.go": "package gb\n\nfunc Sub(a, b int) int { return a - b }\n",
        "mods/gb/calc_test.go": goTest("gb", "TestSub", "Sub(2, 1) != 2"),
      };
    case "rust":
      return {
        "Cargo.toml": '[workspace]\nmembers = ["crates/*"]\nresolver = "2"\n',
        "crates/ra/Cargo.toml": '[package]\nname = "ra"\nversion = "0.1.0"\nedition = "2021"\n',
        "crates/ra/src/lib.rs": rustLib("add", "+", "adds", 3),
        "crates/rb/Cargo.toml": '[package]\nname = "rb"\nversion = "0.1.0"\nedition = "2021"\n',
        "crates/rb/src/lib.rs": rustLib("sub", "-", "subs", 2),
      };
    case "python":
      return {
        "README.md": "A repository whose Python project lives in py/app.\n",
        "py/app/pyproject.toml": '[project]\nname = "app"\nversion = "0.1.0"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
        "py/app/calc.py": "def add(a, b):\n    return a + b\n",
        "py/app/tests/__init__.py": "",
        "py/app/tests/test_calc.py": fixtureFiles("python", true)["tests/test_calc.py"] as string,
      };
  }
}

export async function writeMonorepoFixture(kind: FixtureKind, root: string): Promise<void> {
  await writeTree(root, monorepoFixtureFiles(kind));
}
