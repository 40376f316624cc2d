#!/usr/bin/env node
// Writes docs/tools.md from the catalog (`make docs`).
import { writeFileSync } from "node:fs";
import { renderToolsDoc } from "@webcodex/contracts";

writeFileSync(new URL("../../docs/tools.md", import.meta.url), renderToolsDoc());
