#!/usr/bin/env node
// The file-size gate of `make lint`. A tracked source file (outside generated code, build output
// and examples) may have at most 400 lines, unless tools/scripts/file-size-allowlist.json lists
// it: then at most the lines listed there, its size when it was last reviewed. So a listed file
// fails the gate when it grows, and an unlisted one when it passes 400 lines. Splitting a listed
// file, or shrinking it, is a reason to lower or remove its entry (the gate says which).
//
// Usage: check-file-size.mjs [--allow-list FILE] [--write]
//   --write  rewrites the allow-list with today's sizes of the files over the limit (a reviewed change).
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const LIMIT = 400;
const args = process.argv.slice(2);
const at = args.indexOf("--allow-list");
const listFile = at >= 0 ? path.resolve(args[at + 1] ?? "") : path.join(path.dirname(fileURLToPath(import.meta.url)), "file-size-allowlist.json");
const write = args.includes("--write");

const files = execFileSync("git", ["ls-files", "*.ts", "*.mjs", "*.js"], { encoding: "utf8" })
  .split("\n")
  .filter((f) => f !== "" && !f.startsWith("libs/proto/src/gen/") && !f.includes("/dist/") && !f.startsWith("examples/"));
const sizes = new Map();
for (const f of files) {
  try {
    sizes.set(f, readFileSync(f, "utf8").split("\n").length);
  } catch {
    // deleted in the work tree
  }
}

if (write) {
  const list = Object.fromEntries([...sizes].filter(([, n]) => n > LIMIT).sort(([a], [b]) => (a < b ? -1 : 1)));
  writeFileSync(listFile, `${JSON.stringify(list, null, 2)}\n`);
  process.stdout.write(`check-file-size: ${Object.keys(list).length} files over ${LIMIT} lines written to ${path.relative(process.cwd(), listFile)}\n`);
  process.exit(0);
}

const allowed = JSON.parse(readFileSync(listFile, "utf8"));
const problems = [];
const notes = [];
for (const [f, lines] of sizes) {
  const max = allowed[f];
  if (max === undefined) {
    if (lines > LIMIT) problems.push(`${f}: ${lines} lines, over ${LIMIT} and not in the allow-list (split it at a seam)`);
  } else if (lines > max) {
    problems.push(`${f}: ${lines} lines, grew past its allowed ${max} (split it, or raise its entry in review)`);
  } else if (lines < max) {
    notes.push(`${f}: ${lines} lines, allowed ${max}${lines <= LIMIT ? " (no longer needs an entry)" : ""}`);
  }
}
for (const f of Object.keys(allowed)) if (!sizes.has(f)) notes.push(`${f}: listed but gone (remove its entry)`);
for (const n of notes) process.stdout.write(`check-file-size: shrank, lower its entry: ${n}\n`);
for (const p of problems) process.stderr.write(`check-file-size: ${p}\n`);
if (problems.length > 0) process.exit(1);
process.stdout.write(
  `check-file-size: no file over ${LIMIT} lines outside the allow-list, none past its listed size (${Object.keys(allowed).length} listed)\n`,
);
