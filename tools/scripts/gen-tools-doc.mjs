#!/usr/bin/env node
// Writes docs/tools.md, docs/results.md and docs/tool-policy.schema.json from the code (`make docs`).
import { writeFileSync } from "node:fs";
import { renderResultsDoc, renderToolsDoc, toolPolicySchemaDocument } from "@webcodex/contracts";

writeFileSync(new URL("../../docs/tools.md", import.meta.url), renderToolsDoc());
writeFileSync(new URL("../../docs/results.md", import.meta.url), renderResultsDoc());
writeFileSync(new URL("../../docs/tool-policy.schema.json", import.meta.url), `${JSON.stringify(toolPolicySchemaDocument(), null, 2)}\n`);
