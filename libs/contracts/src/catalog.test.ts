import { test } from "node:test";
import assert from "node:assert/strict";
import { toolDefinitions } from "./catalog.js";
import type { ToolDefinition } from "./tool-definition.js";
import {
  ADMISSION_PROFILES,
  admittedTools,
  gatewayRefusal,
  gatewayToolsInstruction,
  groupToolNamesByCategory,
  HOST_PROFILES,
  toolRoute,
  toolsListResult,
  TOOLS_LIST_MAX_BYTES,
} from "./admission.js";
import { DESCRIPTION_MAX_CHARS, ToolCategory } from "./tool-definition.js";
import type { JsonSchema } from "./json-schema.js";
import { validateToolArguments } from "./schema-validator.js";
import { normalizeToolCall } from "./normalize.js";
import { sampleToolArgVariants } from "./sample-args.js";

const defs = toolDefinitions();
const VALIDATOR_NAMES = new Set(["project_validate", "cargo_check", "cargo_test", "go_test"]);
const verbs = [
  "list",
  "read",
  "get",
  "observe",
  "wait_for",
  "present",
  "create",
  "update",
  "delete",
  "assign",
  "complete",
  "heartbeat",
  "reconcile",
  "stop",
  "start",
  "rotate",
  "run",
  "search",
  "edit",
  "import",
  "call",
  "close",
];

test("tool names are unique", () => {
  assert.equal(new Set(defs.map((d) => d.name)).size, defs.length);
});

test("names are verb_object with no routing prefix, and *_tool only for gateways into another tool namespace", () => {
  for (const d of defs) {
    assert.match(d.name, /^[a-z]+(_[a-z]+)+$/, d.name);
    // The validators are named after the tool they run (contract names); every other tool is verb_object.
    // mcp_tool is named after the namespace it is the gateway into (the spec's own example).
    if (!VALIDATOR_NAMES.has(d.name) && d.name !== "mcp_tool")
      assert.ok(
        verbs.some((v) => d.name.startsWith(`${v}_`)),
        `${d.name} starts with a known verb`,
      );
    assert.ok(!/^(direct|gateway|hidden|host|adaptive)_/.test(d.name), `${d.name} has no routing prefix`);
    if (d.name.endsWith("_tool")) assert.ok(["call_runtime_tool", "mcp_tool"].includes(d.name), d.name);
  }
});

test("every tool has exactly one known category and a description within the ceiling", () => {
  const categories = new Set<string>(Object.values(ToolCategory));
  for (const d of defs) {
    assert.ok(categories.has(d.category), `${d.name} category ${d.category}`);
    assert.ok(d.description.length > 20 && d.description.length <= DESCRIPTION_MAX_CHARS, `${d.name} description length ${d.description.length}`);
  }
});

function assertClosed(schema: JsonSchema, where: string): void {
  if ((schema.type === "object" || schema.properties !== undefined) && schema.oneOf === undefined) {
    const isMap = typeof schema.additionalProperties === "object";
    const isOpaqueArguments = schema.properties === undefined && schema.additionalProperties === undefined && where.endsWith("/arguments");
    assert.ok(schema.additionalProperties === false || isMap || isOpaqueArguments, `${where} is closed`);
    for (const [k, v] of Object.entries(schema.properties ?? {})) assertClosed(v, `${where}/${k}`);
  }
  if (schema.items) assertClosed(schema.items, `${where}/items`);
  // A discriminated union is closed when every branch is.
  for (const [i, branch] of (schema.oneOf ?? []).entries()) assertClosed(branch, `${where}/oneOf/${i}`);
}

test("every input schema is closed (maps are declared maps; call_runtime_tool.arguments is the target tool's)", () => {
  for (const d of defs) assertClosed(d.inputSchema, d.name);
});

test("every sample variant of each schema validates unchanged and normalizes without a rewrite", () => {
  for (const d of defs) {
    for (const args of sampleToolArgVariants(d.name)) {
      assert.equal(validateToolArguments(d.name, args), undefined, `${d.name} sample ${JSON.stringify(args)} validates`);
      const normalized = normalizeToolCall(d.name, structuredClone(args), { isAdmitted: () => true });
      assert.ok(normalized.ok, `${d.name} sample normalizes: ${JSON.stringify(normalized)}`);
      assert.equal(normalized.tool, d.name, `${d.name} sample is not rewritten`);
    }
  }
});

test("Direct ranks are unique and presentation tools are not reachable through the gateway", () => {
  const ranks = defs.filter((d) => d.direct).map((d) => d.direct?.rank);
  assert.equal(new Set(ranks).size, ranks.length);
  for (const d of defs.filter((x) => x.category === "presentation")) {
    // A card the Host mounts (Direct, Presentation or Continuation), or an app-only helper the card calls.
    assert.ok(d.appOnly === true ? d.direct === undefined : d.direct?.reason === "Presentation" || d.direct?.reason === "Continuation", d.name);
    assert.equal(toolRoute(d).fallback, null);
    assert.ok(gatewayRefusal(d.name), `${d.name} is refused by call_runtime_tool`);
  }
});

test("tools not built yet are not admitted; a read_only tenant sees no mutating tool (mcp_tool only for read-only targets)", () => {
  const full = admittedTools({ admissionProfile: "full", hostProfile: "generic" });
  assert.ok(full.every((d) => d.implemented));
  const readOnly = admittedTools({ admissionProfile: "read_only", hostProfile: "generic" });
  assert.ok(readOnly.length > 0 && readOnly.every((d) => d.effect === "read_only" || d.effectByTarget === true));
  assert.deepEqual(
    readOnly.filter((d) => d.effect !== "read_only").map((d) => d.name),
    ["mcp_tool"],
  );
  assert.ok(!readOnly.some((d) => d.name === "edit_project_files" || d.name === "run_shell"));
});

test("category views are sorted, non-overlapping and cover the admitted selection", () => {
  const admitted = admittedTools({ admissionProfile: "full", hostProfile: "generic" });
  const groups = groupToolNamesByCategory(admitted);
  const all = Object.values(groups).flat();
  assert.equal(all.length, admitted.length);
  assert.equal(new Set(all).size, all.length);
  for (const names of Object.values(groups)) assert.deepEqual(names, [...names].sort());
});

test("tools/list of the Direct surface stays within the 8 KiB budget on a generic Host for every admission profile; the App Host's size is reported", (t) => {
  const figures: string[] = [];
  for (const hostProfile of HOST_PROFILES) {
    for (const admissionProfile of ADMISSION_PROFILES) {
      // The descriptors the MCP server serves, built by the same function.
      const result = toolsListResult(admittedTools({ admissionProfile, hostProfile }), hostProfile);
      const bytes = Buffer.byteLength(JSON.stringify(result));
      // An App Host also gets the card descriptors (_meta.ui) and the app-only helpers it keeps from the model.
      if (hostProfile === "generic")
        assert.ok(bytes <= TOOLS_LIST_MAX_BYTES, `tools/list for ${hostProfile}/${admissionProfile} is ${bytes} bytes (budget ${TOOLS_LIST_MAX_BYTES})`);
      else
        assert.ok(
          result.tools.every(
            (d) =>
              !String(d["name"]).startsWith("present_") ||
              (d["_meta"] as { ui?: { resourceUri?: string } } | undefined)?.ui?.resourceUri?.startsWith("ui://webcodex/"),
          ),
        );
      // Direct tools by rank, then the two entry points.
      assert.deepEqual(
        result.tools.slice(-2).map((d) => d["name"]),
        ["read_tool_manifest", "call_runtime_tool"],
      );
      figures.push(`${hostProfile}/${admissionProfile}: ${bytes} B (${result.tools.length} tools)`);
    }
  }
  t.diagnostic(`tools/list bytes, budget ${TOOLS_LIST_MAX_BYTES}: ${figures.join("; ")}`);
});

test("the server instructions name every tool reached through call_runtime_tool, by category; tools/list pays nothing for them", () => {
  const sentence = gatewayToolsInstruction(defs);
  const named = sentence
    .replace(/^Through call_runtime_tool: /, "")
    .replace(/\.$/, "")
    .split("; ")
    .flatMap((g) => g.split(": ")[1]?.split(", ") ?? []);
  const expected = defs
    .filter((d) => d.implemented && toolRoute(d).primary === "call_runtime_tool" && d.category !== "presentation" && d.appOnly !== true)
    .map((d) => d.name);
  assert.deepEqual([...named].sort(), [...expected].sort());
  // Card helpers belong to the App and presentation tools are Direct cards: never named as Gateway tools.
  const cardTools = defs.filter((d) => d.category === "presentation" || d.appOnly === true || d.appResource !== undefined).map((d) => d.name);
  assert.ok(
    cardTools.includes("present_work_result") && cardTools.some((n) => defs.find((d) => d.name === n)?.appOnly === true),
    "the catalog has presentation tools and app-only helpers",
  );
  for (const name of cardTools) assert.ok(!new RegExp(`\\b${name}\\b`).test(sentence), `${name} is not named in the Gateway tools instruction`);
  // Even if an app-only helper or a card were handed in without its Direct route, it is filtered out.
  const disguised = defs
    .filter((d) => cardTools.includes(d.name) && d.implemented)
    .map((d): ToolDefinition => {
      const { direct: _direct, ...rest } = d;
      return rest;
    });
  const disguisedSentence = gatewayToolsInstruction([...defs.filter((d) => !cardTools.includes(d.name)), ...disguised]);
  for (const d of disguised.filter((x) => x.appOnly === true || x.appResource !== undefined))
    assert.ok(!disguisedSentence.includes(d.name), `${d.name} filtered from the instruction`);
  assert.ok(
    named.includes("list_project_files") && named.includes("read_git_diff_hunks") && named.includes("run_process"),
    "Gateway file, git and execution tools are named",
  );
  for (const hostProfile of HOST_PROFILES) {
    for (const admissionProfile of ADMISSION_PROFILES) {
      const listed = JSON.stringify(toolsListResult(admittedTools({ admissionProfile, hostProfile })));
      assert.ok(!listed.includes("read_git_diff_hunks"), `${hostProfile}/${admissionProfile}: no Gateway tool name in tools/list`);
    }
  }
});
