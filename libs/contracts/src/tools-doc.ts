/**
 * Renders docs/tools.md from the catalog, so the tool reference can never drift from
 * `toolDefinitions()` (a test compares the committed file with this output).
 */
import { toolDefinitions } from "./catalog.js";
import { toolRoute } from "./admission.js";
import type { JsonSchema } from "./json-schema.js";
import type { ToolDefinition } from "./tool-definition.js";

function exposure(def: ToolDefinition): string {
  if (def.gatewayEntry) return "Direct (gateway entry point)";
  if (def.direct) return `Direct (${def.direct.reason}, rank ${def.direct.rank})`;
  return "Gateway (via call_runtime_tool)";
}

function describeSchema(schema: JsonSchema): string {
  if (schema.oneOf) return schema.oneOf.map((b) => describeSchema(b)).join(" | ");
  switch (schema.type) {
    case "object": {
      if (typeof schema.additionalProperties === "object") return "map<string, string>";
      if (!schema.properties) return "object";
      const required = new Set(schema.required ?? []);
      return `{${Object.entries(schema.properties)
        .map(([k, v]) => `${k}${required.has(k) ? "" : "?"}: ${describeSchema(v)}`)
        .join(", ")}}`;
    }
    case "array":
      return `${schema.items ? describeSchema(schema.items) : "unknown"}[]`;
    case "string":
      if (schema.const !== undefined) return JSON.stringify(schema.const);
      if (schema.enum) return schema.enum.map((e) => JSON.stringify(e)).join(" | ");
      return "string";
    case "integer": {
      const bounds = [schema.minimum !== undefined ? `>=${schema.minimum}` : "", schema.maximum !== undefined ? `<=${schema.maximum}` : ""]
        .filter(Boolean)
        .join(" ");
      return bounds ? `integer (${bounds})` : "integer";
    }
    default:
      return schema.type ?? "unknown";
  }
}

export function renderToolsDoc(): string {
  const defs = toolDefinitions();
  const lines = [
    "# Tool reference",
    "",
    "Generated from the canonical catalog (`toolDefinitions()` in `libs/contracts`) by `make docs`.",
    "Do not edit by hand: a test fails when this file is stale.",
    "",
    "Exposure: **Direct** tools appear in MCP `tools/list`; **Gateway** tools are discovered with",
    "`read_tool_manifest` and called with `call_runtime_tool`. A tool marked *not yet admitted* has",
    "a contract but no behaviour yet; it is refused rather than stubbed.",
    "",
    "| tool | category | exposure | effect | admitted |",
    "|---|---|---|---|---|",
    ...defs.map((d) => `| \`${d.name}\` | ${d.category} | ${exposure(d)} | ${d.effect} | ${d.implemented ? "yes" : "not yet"} |`),
    "",
  ];
  for (const d of defs) {
    const route = toolRoute(d);
    lines.push(
      `## \`${d.name}\``,
      "",
      d.description,
      "",
      `- category: ${d.category}; effect: ${d.effect}; risk: ${d.risk}; authority: ${d.authority}; runs in: ${d.execution}`,
      `- exposure: ${exposure(d)}; route: primary ${route.primary}, fallback ${route.fallback ?? "none"}`,
      ...(d.clamps?.length ? [`- clamped (never rejected): ${d.clamps.map((c) => `\`${c.path}\` to ${c.ceiling}`).join(", ")}`] : []),
      `- input: \`${describeSchema(d.inputSchema)}\``,
      "",
      "<details><summary>JSON Schema</summary>",
      "",
      "```json",
      JSON.stringify(d.inputSchema, null, 2),
      "```",
      "",
      "</details>",
      "",
    );
  }
  return lines.join("\n");
}
