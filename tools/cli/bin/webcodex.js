#!/usr/bin/env node
import { setFlagsFromString } from "node:v8";

// `webcodex dev` and `webcodex stdio` run one per Host session on a developer's machine, mostly
// idle: their young generation keeps its initial size instead of growing to 16 MiB semi-spaces,
// which start-up alone would fill and keep resident. Set before any other module loads.
const [command] = process.argv.slice(2);
if (command === "dev" || command === "stdio") setFlagsFromString("--semi-space-growth-factor=1");

const { runCommand } = await import("../dist/service-entry.js");
const { exitCodeFor } = await import("../dist/args.js");

// One line, no stack trace; exit 2 for a command line that cannot run as given.
runCommand(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`webcodex: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(exitCodeFor(error));
});
