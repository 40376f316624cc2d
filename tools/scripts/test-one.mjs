#!/usr/bin/env node
// `make test-one F=<file.test.ts>`: builds only the TypeScript project that holds the test (and,
// incrementally, the projects it references), then runs that one test file with node --test.
// Extra arguments after the file go to node --test (e.g. --test-name-pattern=...).
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";

const [file, ...rest] = process.argv.slice(2);
if (!file || !/\.test\.(ts|mts)$/.test(file)) {
  process.stderr.write("usage: make test-one F=<path/to/file.test.ts> (e.g. F=services/runner/src/workspace/edit-plan.test.ts)\n");
  process.exit(2);
}
const rel = path.relative(process.cwd(), path.resolve(file));
if (!existsSync(rel)) {
  process.stderr.write(`test-one: no file ${rel}\n`);
  process.exit(2);
}
const parts = rel.split(path.sep);
let project;
let compiled;
if (parts[0] === "test") {
  // test/{e2e,integration,...}/x.test.ts compiles to test/dist/{e2e,...}/x.test.js.
  project = "test";
  compiled = path.join("test", "dist", ...parts.slice(1));
} else if (["libs", "services", "tools"].includes(parts[0] ?? "") && parts[2] === "src") {
  // <pkg>/src/a/b.test.ts compiles to <pkg>/dist/a/b.test.js.
  project = path.join(parts[0], parts[1]);
  compiled = path.join(project, "dist", ...parts.slice(3));
} else {
  process.stderr.write(`test-one: ${rel} is neither under test/ nor under <libs|services|tools>/<package>/src/\n`);
  process.exit(2);
}
compiled = compiled.replace(/\.m?ts$/, ".js");
const tsc = spawnSync(path.join("node_modules", ".bin", "tsc"), ["-b", project], { stdio: "inherit" });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
const run = spawnSync(process.execPath, ["--test", ...rest, compiled], { stdio: "inherit" });
process.exit(run.status ?? 1);
