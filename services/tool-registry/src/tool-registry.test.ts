/** GetAdmittedCatalog over an in-process router transport: admission per scopes/profile, fail closed. */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { ToolRegistryService } from "@webcodex/proto";
import { toolDefinition, toolDefinitions } from "@webcodex/contracts";
import { admissionContext, catalogVersion } from "./tool-registry.js";
import { routes } from "./routes.js";

const client = createClient(ToolRegistryService, createRouterTransport(routes));
const names = async (admissionProfile: string, hostProfile: string) =>
  (await client.getAdmittedCatalog({ admissionProfile, hostProfile })).tools.map((t) => t.name);

describe("tool-registry GetAdmittedCatalog", () => {
  it("a full caller on a generic Host gets every implemented tool except the app-only card helpers, with exact schemas", async () => {
    const res = await client.getAdmittedCatalog({ admissionProfile: "full", hostProfile: "generic" });
    assert.equal(res.catalogVersion, catalogVersion);
    const expected = toolDefinitions()
      .filter((d) => d.implemented && d.appOnly !== true)
      .map((d) => d.name);
    assert.deepEqual(
      res.tools.map((t) => t.name),
      expected,
    );
    assert.ok(expected.includes("run_shell") && expected.includes("edit_project_files"));
    for (const t of res.tools) {
      const def = toolDefinition(t.name);
      assert.deepEqual(JSON.parse(t.inputSchemaJson), def?.inputSchema, `${t.name} schema`);
      assert.deepEqual(
        [t.category, t.effect, t.directReason, t.directRank],
        [def?.category, def?.effect, def?.direct?.reason ?? "", def?.direct?.rank ?? 0],
        t.name,
      );
    }
  });

  it("a read_only caller gets only tools that change nothing (and mcp_tool, which admits only read-only targets for them)", async () => {
    const readOnly = await names("read_only", "generic");
    assert.ok(readOnly.length > 0);
    assert.ok(
      readOnly.every((n) => toolDefinition(n)?.effect === "read_only" || toolDefinition(n)?.effectByTarget === true),
      readOnly.join(","),
    );
    for (const mutating of ["run_shell", "run_process", "edit_project_files", "create_session"]) assert.ok(!readOnly.includes(mutating), mutating);
    assert.ok(readOnly.includes("read_files") && readOnly.includes("call_runtime_tool"));
  });

  it("the app Host profile is its own admission: the app-only card helpers are admitted there, never on generic", async () => {
    const app = await names("full", "app");
    const generic = await names("full", "generic");
    const helpers = toolDefinitions()
      .filter((d) => d.implemented && d.appOnly === true)
      .map((d) => d.name);
    assert.ok(helpers.length > 0);
    assert.deepEqual(
      app.filter((n) => !generic.includes(n)),
      helpers,
    );
    assert.ok(!generic.some((n) => toolDefinition(n)?.appOnly === true));
  });

  it("an unknown or empty admission or host profile admits nothing: the request is refused", async () => {
    for (const [admissionProfile, hostProfile] of [
      ["admin", "generic"],
      ["full", "chatgpt"],
      ["", "generic"],
      ["full", ""],
      ["FULL", "generic"],
    ] as const) {
      await assert.rejects(
        client.getAdmittedCatalog({ admissionProfile, hostProfile }),
        (e: unknown) => e instanceof ConnectError && e.code === Code.InvalidArgument,
        `${admissionProfile}/${hostProfile}`,
      );
    }
  });

  it("admissionContext maps only known profiles", () => {
    assert.deepEqual(admissionContext("read_only", "app"), { admissionProfile: "read_only", hostProfile: "app" });
    assert.equal(admissionContext("full", "unknown"), undefined);
    assert.equal(admissionContext("superuser", "generic"), undefined);
  });
});
