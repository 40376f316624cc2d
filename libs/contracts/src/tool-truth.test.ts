/**
 * What a Host reads before any call is true of what the tools do: annotations follow each
 * tool's catalog effect (call_runtime_tool included), a read-only caller's instructions name no
 * tool it may not call, and every manifest's `required` is what a call needs.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { toolDefinition, toolDefinitions } from "./catalog.js";
import {
  ADMISSION_PROFILES,
  admittedTools,
  gatewayRefusal,
  HOST_PROFILES,
  MCP_ANNOTATION_DEFAULTS,
  serverInstructions,
  toolAnnotations,
  toolsListResult,
} from "./admission.js";
import { normalizeToolCall } from "./normalize.js";
import { sampleToolArgVariants } from "./sample-args.js";
import type { ToolDefinition } from "./tool-definition.js";

const defs = toolDefinitions();
const all = { isAdmitted: () => true };

test("every tool's annotations follow its catalog effect: read-only exactly when nothing changes, writes and runs destructive, runs open-world", () => {
  for (const def of defs.filter((d) => d.forwards !== true)) {
    const a = toolAnnotations(def);
    assert.equal(a.readOnlyHint, def.effect === "read_only", `${def.name} readOnlyHint`);
    if (def.effect === "workspace_write" || def.effect === "process_execution") assert.equal(a.destructiveHint, true, `${def.name} destructiveHint`);
    if (def.effect === "process_execution") assert.equal(a.openWorldHint, true, `${def.name} openWorldHint`);
    if (def.effect === "read_only") assert.equal(a.idempotentHint, true, `${def.name} idempotentHint`);
  }
  // The catalog's own hints, where the effect alone does not say it.
  assert.equal(toolAnnotations(toolDefinition("delete_project") as ToolDefinition).destructiveHint, true);
  assert.equal(toolAnnotations(toolDefinition("create_project") as ToolDefinition).openWorldHint, true, "clones from a git remote");
  assert.equal(toolAnnotations(toolDefinition("create_agent_task") as ToolDefinition).destructiveHint, false, "only adds a record");
});

test("call_runtime_tool is annotated by the tools it can run for this caller: not read-only for a full caller, read-only for a read-only one", () => {
  const forwarder = toolDefinition("call_runtime_tool") as ToolDefinition;
  for (const admissionProfile of ADMISSION_PROFILES) {
    const admitted = admittedTools({ admissionProfile, hostProfile: "generic" });
    // A tool whose effect is its target's (mcp_tool) reaches only operator-marked read-only
    // targets for a read-only caller (admission), so it is read-only for that caller.
    const reachable = admitted
      .filter((d) => gatewayRefusal(d.name) === undefined)
      .map((d) =>
        d.effectByTarget === true && admissionProfile === "read_only"
          ? { ...toolAnnotations(d), readOnlyHint: true, destructiveHint: false }
          : toolAnnotations(d),
      );
    const a = toolAnnotations(forwarder, admitted);
    assert.equal(
      a.readOnlyHint,
      reachable.every((r) => r.readOnlyHint),
      admissionProfile,
    );
    assert.equal(
      a.destructiveHint,
      reachable.some((r) => r.destructiveHint),
      admissionProfile,
    );
    assert.equal(
      a.openWorldHint,
      reachable.some((r) => r.openWorldHint),
      admissionProfile,
    );
  }
  const full = toolAnnotations(forwarder, admittedTools({ admissionProfile: "full", hostProfile: "generic" }));
  assert.deepEqual(full, { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true });
  assert.equal(toolAnnotations(forwarder, admittedTools({ admissionProfile: "read_only", hostProfile: "generic" })).readOnlyHint, true);
});

test("every descriptor in tools/list carries its annotations, for every admission and Host profile", () => {
  for (const hostProfile of HOST_PROFILES) {
    for (const admissionProfile of ADMISSION_PROFILES) {
      const admitted = admittedTools({ admissionProfile, hostProfile });
      for (const descriptor of toolsListResult(admitted, hostProfile).tools) {
        const def = toolDefinition(String(descriptor["name"])) as ToolDefinition;
        const expected = toolAnnotations(def, admitted);
        // What a Host reads: the stated hints over MCP's defaults for the ones left out.
        const shown = { ...MCP_ANNOTATION_DEFAULTS, ...(descriptor["annotations"] as Record<string, boolean> | undefined) };
        assert.equal(shown["readOnlyHint"], expected.readOnlyHint, `${def.name} (${hostProfile}/${admissionProfile})`);
        assert.equal(shown["openWorldHint"], expected.openWorldHint, def.name);
        if (!expected.readOnlyHint) assert.deepEqual(shown, expected, def.name);
      }
    }
  }
});

test("a read-only caller's instructions name no tool it may not call; a full caller's name the edit workflow", () => {
  const readOnly = serverInstructions(admittedTools({ admissionProfile: "read_only", hostProfile: "generic" }));
  // A tool whose effect is its target's (mcp_tool) is one it may call: only read-only targets.
  for (const def of defs.filter((d) => d.effect !== "read_only" && d.effectByTarget !== true)) {
    assert.ok(!new RegExp(`\\b${def.name}\\b`).test(readOnly), `${def.name} is named to a read-only caller: ${readOnly}`);
  }
  assert.match(readOnly, /read_files/);
  const full = serverInstructions(admittedTools({ admissionProfile: "full", hostProfile: "generic" }));
  assert.match(full, /edit with edit_project_files/);
  assert.match(full, /run_process/);
});

test("every manifest's required is what the tool needs: a call with only its required fields (sample values) is accepted", () => {
  for (const def of defs.filter((d) => d.implemented)) {
    const required = new Set(def.inputSchema.required ?? []);
    for (const sample of sampleToolArgVariants(def.name)) {
      // Samples hold the required fields only: no field the manifest calls optional is needed.
      assert.deepEqual(Object.keys(sample).sort(), [...required].sort(), `${def.name}: sample fields are its required fields`);
      const normalized = normalizeToolCall(def.name, sample, all);
      assert.ok(normalized.ok, `${def.name}: ${JSON.stringify(normalized.ok ? "" : normalized.failure)}`);
    }
  }
});
