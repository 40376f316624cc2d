import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HOST_PROFILES, admittedTools, cellDeclaration, cellToolNames, listedTools, toolDefinitions } from "@webcodex/contracts";
import { BUILTIN_BOOTSTRAP_GUIDANCE_MAX_CHARS } from "@webcodex/contracts";
import { instructionsFor } from "../mcp/mcp-server.js";

const serverInstructions = (hostProfile: (typeof HOST_PROFILES)[number]) => instructionsFor("full", hostProfile);

describe("Code Mode selection and bootstrap guidance", () => {
  it("keeps every Host profile's server instructions within the bootstrap ceiling", () => {
    for (const profile of HOST_PROFILES) {
      const text = serverInstructions(profile);
      assert.ok(text.length <= BUILTIN_BOOTSTRAP_GUIDANCE_MAX_CHARS, `${profile}: ${text.length} characters`);
    }
  });

  it("gives Code Mode guidance only to the code_mode Host profile, which no longer names run_code_cell as a Gateway tool", () => {
    assert.match(serverInstructions("code_mode"), /run_code_cell/);
    assert.match(serverInstructions("code_mode"), /Code Mode/);
    assert.doesNotMatch(serverInstructions("generic"), /Code Mode/);
    assert.doesNotMatch(serverInstructions("code_mode"), /Through call_runtime_tool:[^.]*run_code_cell/);
    assert.match(serverInstructions("generic"), /Through call_runtime_tool:[^.]*run_code_cell/);
  });

  it("lists run_code_cell Direct only for the code_mode Host profile", () => {
    const names = (profile: (typeof HOST_PROFILES)[number]) =>
      listedTools(admittedTools({ admissionProfile: "full", hostProfile: profile }), profile).map((d) => d.name);
    assert.ok(names("code_mode").includes("run_code_cell"));
    assert.ok(!names("generic").includes("run_code_cell"));
    assert.ok(!names("app").includes("run_code_cell"));
  });

  it("derives the cell's tools from the effect column: every read-only tool a model can call, no effectful one", () => {
    const names = cellToolNames(toolDefinitions());
    for (const def of toolDefinitions()) {
      if (def.effect !== "read_only") assert.ok(!names.includes(def.name), def.name);
    }
    assert.ok(names.includes("read_files") && names.includes("search_project_texts") && names.includes("read_git_diff_hunks"));
    assert.ok(!names.includes("run_code_cell") && !names.includes("call_runtime_tool"));
    const declaration = cellDeclaration(admittedTools({ admissionProfile: "read_only", hostProfile: "generic" }));
    for (const name of names) assert.match(declaration, new RegExp(`\\n  ${name}\\(args: `));
    assert.doesNotMatch(declaration, /edit_project_files|run_shell/);
  });
});
