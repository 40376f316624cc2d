#!/usr/bin/env node
import { runCommand } from "../dist/service-entry.js";
import { exitCodeFor } from "../dist/args.js";

// One line, no stack trace; exit 2 for a command line that cannot run as given.
runCommand(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`webcodex: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(exitCodeFor(error));
});
