import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { toolDefinition } from "./catalog.js";
import { admittedTools, gatewayRefusal, withheldTools } from "./admission.js";
import { normalizeToolCall } from "./normalize.js";
import { parseToolPolicy, policyAdmits, ToolPolicyError, toolPolicySchemaDocument } from "./tool-policy.js";
import type { ToolDefinition } from "./tool-definition.js";

const def = (name: string) => toolDefinition(name) as ToolDefinition;

test("docs/tool-policy.schema.json is the schema the registry checks (run `make docs` after changing it)", () => {
  const committed = JSON.parse(readFileSync(new URL("../../../docs/tool-policy.schema.json", import.meta.url), "utf8")) as unknown;
  assert.deepEqual(committed, toolPolicySchemaDocument());
});

test("deny wins over allow, allow lists are exhaustive, and every applicable rule must admit", () => {
  const policy = parseToolPolicy({
    default: { deny_categories: ["agents"] },
    tenants: { t: { allow_categories: ["files"], allow_tools: ["run_shell"], deny_tools: ["list_project_files"] } },
    clients: { c: { deny_tools: ["read_files"] } },
  });
  const t = { tenant: "t" };
  assert.equal(policyAdmits(policy, t, def("run_shell")), true, "allowed by name");
  assert.equal(policyAdmits(policy, t, def("read_files")), true, "allowed by category");
  assert.equal(policyAdmits(policy, t, def("list_project_files")), false, "deny wins over the allowed category");
  assert.equal(policyAdmits(policy, t, def("run_process")), false, "not named by the allow lists");
  assert.equal(policyAdmits(policy, { tenant: "t", oauthClient: "c" }, def("read_files")), false, "the client rule narrows too");
  assert.equal(policyAdmits(policy, { tenant: "other" }, def("run_process")), true);
  assert.equal(policyAdmits(policy, { tenant: "other" }, def("create_agent")), false, "the default rule applies to everyone");
  assert.equal(policyAdmits(undefined, t, def("run_process")), true, "no policy admits");
});

test("a withheld tool is an unknown name: normalization and call_runtime_tool answer exactly as for a name that never existed", () => {
  const policy = parseToolPolicy({ tenants: { t: { deny_tools: ["run_shell"] } } });
  const context = { admissionProfile: "full", hostProfile: "generic", policy: { policy, subject: { tenant: "t" } } } as const;
  assert.ok(!admittedTools(context).some((d) => d.name === "run_shell"));
  const withheld = new Set(withheldTools(context).map((d) => d.name));
  assert.deepEqual([...withheld], ["run_shell"]);
  const ctx = { isAdmitted: () => true, isWithheld: (n: string) => withheld.has(n) };
  const shell = normalizeToolCall("run_shell", { project: "~p1", command: "true" }, ctx);
  const unknown = normalizeToolCall("no_such_tool", { project: "~p1", command: "true" }, ctx);
  assert.deepEqual(JSON.parse(JSON.stringify(shell).replaceAll("run_shell", "no_such_tool")), unknown);
  assert.deepEqual(gatewayRefusal("run_shell", withheld), gatewayRefusal("no_such_tool"));
  assert.equal(gatewayRefusal("run_shell"), undefined, "without the policy it is callable");
});

test("a malformed policy names the field", () => {
  const cases: Array<[unknown, string]> = [
    [{ tenants: { acme: { deny_tools: ["read_files", "run_shel"] } } }, "/tenants/acme/deny_tools/1"],
    [{ tenants: { "a/b": { allow_tools: ["nope"] } } }, "/tenants/a~1b/allow_tools/0"],
    [{ default: { allow_categories: ["shell"] } }, "/default/allow_categories/0"],
    [{ clients: { c: { deny_tools: ["run_shell", "run_shell"] } } }, "/clients/c/deny_tools"],
    [{ clients: { c: { denyTools: [] } } }, "/clients/c/denyTools"],
    [[], "/"],
  ];
  for (const [value, field] of cases) {
    assert.throws(
      () => parseToolPolicy(value),
      (e: unknown) => e instanceof ToolPolicyError && e.field === field && e.message.startsWith(`invalid tool policy: ${field} `),
      JSON.stringify(value),
    );
  }
});
