#!/usr/bin/env node
// Writes docs/tools.md and docs/results.md from the code (`make docs`).
import { writeFileSync } from "node:fs";
import { renderResultsDoc, renderToolsDoc } from "@webcodex/contracts";

writeFileSync(new URL("../../docs/tools.md", import.meta.url), renderToolsDoc());
writeFileSync(new URL("../../docs/results.md", import.meta.url), renderResultsDoc());
