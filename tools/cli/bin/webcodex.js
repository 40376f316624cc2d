#!/usr/bin/env node
import { run } from "../dist/main.js";

run(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`webcodex: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
