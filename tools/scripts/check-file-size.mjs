#!/usr/bin/env node
// Fails when a source file outside generated code is over 400 lines and its header does not
// say which one concept it is ("One concept over 400 lines: …" in its first 30 lines).
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

const LIMIT = 400;
const files = execFileSync("git", ["ls-files", "*.ts", "*.mjs", "*.js"], { encoding: "utf8" })
  .split("\n")
  .filter((f) => f !== "" && !f.startsWith("libs/proto/src/gen/") && !f.includes("/dist/") && !f.startsWith("examples/"));
const offenders = [];
for (const f of files) {
  let text;
  try {
    text = readFileSync(f, "utf8");
  } catch {
    continue; // deleted in the work tree
  }
  const lines = text.split("\n").length;
  if (
    lines > LIMIT &&
    !text
      .split("\n")
      .slice(0, 30)
      .some((l) => l.includes("One concept over 400 lines:"))
  )
    offenders.push(`${f} (${lines} lines)`);
}
for (const o of offenders) process.stderr.write(`over ${LIMIT} lines with no "One concept over 400 lines:" header: ${o}\n`);
if (offenders.length > 0) process.exit(1);
process.stdout.write(`check-file-size: every file over ${LIMIT} lines names its one concept\n`);
