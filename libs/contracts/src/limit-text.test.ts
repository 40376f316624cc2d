import { test } from "node:test";
import assert from "node:assert/strict";
import { clampRule, toolDefinitions } from "./catalog.js";
import { array, int, object, str } from "./json-schema.js";
import type { JsonSchema } from "./json-schema.js";
import { renderLimitText } from "./limit-text.js";
import { normalizeToolCall } from "./normalize.js";
import { sampleToolArgs } from "./sample-args.js";
import type { ToolDefinition } from "./tool-definition.js";

/** Every text a model reads for a tool: its description and every schema description. */
function texts(def: ToolDefinition): string[] {
  const out = [def.description];
  const walk = (s: JsonSchema | undefined) => {
    if (!s) return;
    if (s.description) out.push(s.description);
    for (const v of Object.values(s.properties ?? {})) walk(v);
    walk(s.items);
    for (const o of [...(s.oneOf ?? []), ...(s.anyOf ?? [])]) walk(o);
  };
  walk(def.inputSchema);
  return out;
}

/** Sets `value` at a clamp rule's dotted path (`*` → the first element) of sample arguments. */
function setAt(args: Record<string, unknown>, path: string, value: number): boolean {
  const parts = path.split(".");
  let node: unknown = args;
  for (const [i, part] of parts.entries()) {
    if (part === "*") {
      if (!Array.isArray(node) || node.length === 0) return false;
      node = node[0];
      continue;
    }
    const holder = node as Record<string, unknown>;
    if (i === parts.length - 1) {
      holder[part] = value;
      return true;
    }
    node = holder[part];
  }
  return false;
}

test("a limit is written once: the rendered text states each clamp rule, and normalization enforces that same ceiling", () => {
  let checked = 0;
  for (const def of toolDefinitions().filter((d) => d.clamps !== undefined)) {
    const text = texts(def).join("\n");
    for (const rule of def.clamps ?? []) {
      assert.ok(
        text.includes(`clamped to ${rule.ceiling}`) || text.includes(`..${rule.ceiling}`),
        `${def.name}: the text states ${rule.path}'s ceiling ${rule.ceiling}`,
      );
      const args = structuredClone(sampleToolArgs(def.name));
      if (!setAt(args, rule.path, rule.ceiling + 1)) continue;
      const r = normalizeToolCall(def.name, args, { isAdmitted: () => true });
      assert.ok(r.ok, `${def.name}: ${JSON.stringify(r)}`);
      assert.equal(
        Object.values(r.normalization?.effective ?? {})[0],
        rule.ceiling,
        `${def.name}: ${rule.path} above the ceiling is clamped to the rule's ceiling`,
      );
      checked++;
    }
  }
  assert.ok(checked >= 20, `clamps checked end to end: ${checked}`);
});

test("no description states a limit by hand: every ceiling and batch size in the text is a rule's, a schema's or a named limit's", () => {
  for (const def of toolDefinitions()) {
    const ceilings = new Set((def.clamps ?? []).map((r) => r.ceiling));
    for (const t of texts(def)) {
      for (const m of t.matchAll(/clamped to (\d+)/g)) assert.ok(ceilings.has(Number(m[1])), `${def.name}: "clamped to ${m[1]}" comes from a clamp rule`);
      assert.ok(!t.includes("{{"), `${def.name}: no unrendered placeholder in ${t}`);
    }
    const maxItems = new Set<number>();
    const walk = (s: JsonSchema | undefined) => {
      if (!s) return;
      if (s.maxItems !== undefined) maxItems.add(s.maxItems);
      for (const v of Object.values(s.properties ?? {})) walk(v);
      walk(s.items);
      for (const o of s.oneOf ?? []) walk(o);
    };
    walk(def.inputSchema);
    for (const t of texts(def))
      for (const m of t.matchAll(/Up to (\d+)/g)) assert.ok(maxItems.has(Number(m[1])), `${def.name}: "Up to ${m[1]}" is a schema's maxItems`);
  }
});

test("changing a definition's ceiling, default, maxItems or limit changes the text rendered from it", () => {
  const def = (ceiling: number, maxItems: number, bytes: number): ToolDefinition => ({
    name: "probe",
    category: "files",
    effect: "read_only",
    risk: "low",
    authority: "project_read",
    execution: "runner",
    implemented: true,
    description: "Waits ({{wait_ms}}); hunks 0..{{wait_ms:ceiling}}; max {{max_bytes:MiB}} or {{small:KiB}}; {{count}} items.",
    inputSchema: object({ wait_ms: int("Wait ({{wait_ms}})."), list: array(str(), "Up to {{maxItems}} entries.", { maxItems }) }),
    clamps: [{ path: "wait_ms", ceiling, minimum: 0, default: 10 }],
    limits: { max_bytes: bytes, small: 8192, count: 3 },
  });
  const a = renderLimitText(def(30_000, 64, 4 * 1024 * 1024));
  assert.equal(a.description, "Waits (default 10, clamped to 30000); hunks 0..30000; max 4 MiB or 8 KiB; 3 items.");
  assert.equal(a.inputSchema.properties?.["wait_ms"]?.description, "Wait (default 10, clamped to 30000).");
  assert.equal(a.inputSchema.properties?.["list"]?.description, "Up to 64 entries.");
  const b = renderLimitText(def(45_000, 8, 6 * 1024 * 1024));
  assert.equal(b.description, "Waits (default 10, clamped to 45000); hunks 0..45000; max 6 MiB or 8 KiB; 3 items.");
  assert.equal(b.inputSchema.properties?.["list"]?.description, "Up to 8 entries.");
  assert.throws(() => renderLimitText({ ...def(1, 1, 1), description: "({{timeout_ms}})" }), /names no clamp rule or limit/);
});

test("the services read a limit from its ToolDefinition (clampRule): one rule for every wait_ms of the pending-capable tools", () => {
  const waits = toolDefinitions().flatMap((d) => (d.clamps ?? []).filter((r) => r.path === "wait_ms").map((r) => [d.name, r] as const));
  assert.ok(waits.length >= 10);
  for (const [name, rule] of waits) assert.deepEqual(rule, clampRule("run_process", "wait_ms"), `${name}: the shared wait_ms rule`);
  assert.throws(() => clampRule("run_process", "nope"), /no clamp rule/);
});
