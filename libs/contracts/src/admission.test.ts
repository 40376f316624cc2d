import { test } from "node:test";
import assert from "node:assert/strict";
import { toolDefinition, toolDefinitions } from "./catalog.js";
import { admittedTools, forwardedCall, gatewayRefusal, isAdmitted, isWithheld, withheldTools } from "./admission.js";
import type { AdmissionContext } from "./admission.js";
import { parseToolPolicy } from "./tool-policy.js";
import type { ToolDefinition } from "./tool-definition.js";

const def = (name: string) => toolDefinition(name) as ToolDefinition;
const full: AdmissionContext = { admissionProfile: "full", hostProfile: "generic" };
const readOnly: AdmissionContext = { admissionProfile: "read_only", hostProfile: "generic" };
const app: AdmissionContext = { admissionProfile: "full", hostProfile: "app" };

test("a tool not implemented is never admitted, whatever the profile", () => {
  const unbuilt = { ...def("read_files"), implemented: false };
  for (const context of [full, readOnly, app]) assert.equal(isAdmitted(unbuilt, context), false);
  assert.equal(isAdmitted(def("read_files"), full), true);
});

test("a read_only tenant is admitted read-only tools and tools whose effect depends on their target, nothing else", () => {
  assert.equal(isAdmitted(def("read_files"), readOnly), true);
  assert.equal(isAdmitted(def("edit_project_files"), readOnly), false);
  assert.equal(isAdmitted(def("create_project"), readOnly), false);
  assert.equal(isAdmitted(def("mcp_tool"), readOnly), true, "mcp_tool is checked per target");
  assert.equal(isAdmitted({ ...def("create_project"), effectByTarget: true }, readOnly), true);
  assert.equal(isAdmitted(def("edit_project_files"), full), true);
  const admitted = admittedTools(readOnly).map((d) => d.name);
  assert.ok(admitted.length > 0);
  for (const name of admitted) assert.ok(def(name).effect === "read_only" || def(name).effectByTarget === true, name);
});

test("card helpers are admitted only for App Hosts", () => {
  assert.equal(isAdmitted(def("read_job_continuation"), full), false);
  assert.equal(isAdmitted(def("read_job_continuation"), { admissionProfile: "full", hostProfile: "code_mode" }), false);
  assert.equal(isAdmitted(def("read_job_continuation"), app), true);
  assert.ok(admittedTools(app).some((d) => d.name === "read_job_continuation"));
  assert.ok(!admittedTools(full).some((d) => d.name === "read_job_continuation"));
  // Everything admitted to a generic Host is admitted to an App Host too.
  const onApp = new Set(admittedTools(app).map((d) => d.name));
  for (const d of admittedTools(full)) assert.ok(onApp.has(d.name), d.name);
});

test("the operator's policy withholds tools from the subject it names only", () => {
  const policy = parseToolPolicy({ tenants: { t: { deny_tools: ["run_shell", "read_files"] } } });
  const forT: AdmissionContext = { ...full, policy: { policy, subject: { tenant: "t" } } };
  const forOther: AdmissionContext = { ...full, policy: { policy, subject: { tenant: "u" } } };
  assert.equal(isWithheld(def("run_shell"), forT), true);
  assert.equal(isWithheld(def("run_process"), forT), false);
  assert.equal(isWithheld(def("run_shell"), forOther), false);
  assert.equal(isWithheld(def("run_shell"), full), false, "no policy withholds nothing");
  assert.equal(isAdmitted(def("run_shell"), forT), false);
  assert.deepEqual(
    withheldTools(forT)
      .map((d) => d.name)
      .sort(),
    ["read_files", "run_shell"],
  );
  assert.deepEqual(withheldTools(forOther), []);
  // A withheld tool that is also unbuilt is not listed as withheld: it does not exist for anyone.
  assert.equal(
    withheldTools(forT).every((d) => d.implemented),
    true,
  );
  assert.equal(admittedTools(forT).length, admittedTools(full).length - 2);
});

test("call_runtime_tool refuses unknown, withheld, entry-point, app-only and presentation tools, and runs the rest", () => {
  const refusal = (tool: string, withheld?: ReadonlySet<string>) => gatewayRefusal(tool, withheld);
  assert.deepEqual(refusal("no_such_tool"), { reason_code: "unknown_tool", detail_code: "unknown_tool", message: "No tool has this name; see list_tools." });
  assert.deepEqual(refusal("read_files", new Set(["read_files"])), refusal("no_such_tool"));
  assert.equal(refusal("read_files", new Set(["run_shell"])), undefined);
  assert.equal(refusal("read_files"), undefined);
  for (const entry of ["call_runtime_tool", "read_tool_manifest"]) {
    assert.deepEqual(refusal(entry), {
      reason_code: "invalid_value",
      detail_code: "gateway_entry_point",
      message: `Call ${entry} directly, not through call_runtime_tool.`,
    });
  }
  assert.deepEqual(refusal("read_job_continuation"), {
    reason_code: "presentation_tool_not_callable",
    detail_code: "app_only",
    message: "Only a mounted card calls this tool.",
  });
  for (const presentation of ["present_work_result", "present_agent_continuation"]) {
    assert.deepEqual(refusal(presentation), {
      reason_code: "presentation_tool_not_callable",
      detail_code: "not_gateway_callable",
      message: "Call this tool directly so the Host can present it.",
    });
  }
  // Every tool is either refused or runnable, and the refused ones are exactly those kinds.
  for (const d of toolDefinitions()) {
    const kind = d.gatewayEntry === true || d.appOnly === true || d.direct?.reason === "Presentation" || d.direct?.reason === "Continuation";
    assert.equal(refusal(d.name) !== undefined, kind, d.name);
  }
});

test("a call through call_runtime_tool is looked through to the tool it names", () => {
  assert.deepEqual(forwardedCall("call_runtime_tool", { tool: "read_files", arguments: { files: [] } }), { tool: "read_files", args: { files: [] } });
  assert.deepEqual(forwardedCall("read_files", { tool: "run_shell", arguments: {} }), { tool: "read_files", args: { tool: "run_shell", arguments: {} } });
  const raw = { tool: 7, arguments: {} };
  assert.deepEqual(forwardedCall("call_runtime_tool", raw), { tool: "call_runtime_tool", args: raw });
  assert.deepEqual(forwardedCall("call_runtime_tool", null), { tool: "call_runtime_tool", args: null });
  assert.deepEqual(forwardedCall("call_runtime_tool", "read_files"), { tool: "call_runtime_tool", args: "read_files" });
});
