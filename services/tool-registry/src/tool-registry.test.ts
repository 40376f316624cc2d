/** GetAdmittedCatalog over an in-process router transport: admission per scopes/profile, fail closed. */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { ToolRegistryService } from "@webcodex/proto";
import { parseToolPolicy, toolDefinition, toolDefinitions } from "@webcodex/contracts";
import { admissionContext, catalogVersion } from "./tool-registry.js";
import { routes, toolRegistryRoutes } from "./routes.js";
import { loadToolPolicy } from "./config.js";

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

describe("tool-registry GetAdmittedCatalog with a tool policy", () => {
  const policy = parseToolPolicy({
    default: { deny_tools: ["delete_project"] },
    tenants: { locked: { deny_tools: ["run_shell"] }, readers: { allow_categories: ["discovery", "files"] } },
    clients: { "untrusted-host": { deny_categories: ["execution"] } },
  });
  const policed = createClient(ToolRegistryService, createRouterTransport(toolRegistryRoutes(policy)));
  const ask = (tenant: string, oauthClient = "") => policed.getAdmittedCatalog({ admissionProfile: "full", hostProfile: "generic", tenant, oauthClient });

  it("a tenant denied run_shell is not admitted it and is told it is withheld; another tenant still is", async () => {
    const locked = await ask("locked");
    assert.ok(!locked.tools.some((t) => t.name === "run_shell"));
    assert.ok(locked.withheldTools.includes("run_shell"));
    const open = await ask("open");
    assert.ok(open.tools.some((t) => t.name === "run_shell"));
    assert.ok(!open.withheldTools.includes("run_shell"));
  });

  it("the default rule applies to every tenant and each rule narrows: deny wins, allow lists are exhaustive", async () => {
    for (const tenant of ["open", "locked", "readers"]) {
      const res = await ask(tenant);
      assert.ok(!res.tools.some((t) => t.name === "delete_project"), tenant);
      assert.ok(res.withheldTools.includes("delete_project"), tenant);
    }
    const readers = await ask("readers");
    assert.deepEqual([...new Set(readers.tools.map((t) => t.category))].sort(), ["discovery", "files"]);
  });

  it("an OAuth client rule withholds a category for that client only, whatever its tenant", async () => {
    const untrusted = await ask("open", "untrusted-host");
    const execution = toolDefinitions()
      .filter((d) => d.implemented && d.category === "execution")
      .map((d) => d.name);
    assert.ok(execution.length > 1);
    for (const name of execution) assert.ok(untrusted.withheldTools.includes(name), name);
    assert.ok(!untrusted.tools.some((t) => t.category === "execution"));
    assert.ok((await ask("open", "other-host")).tools.some((t) => t.name === "run_shell"));
  });

  it("tenant ids that are Object.prototype names get no rule from the prototype", async () => {
    for (const tenant of ["constructor", "__proto__", "toString"])
      assert.ok(
        (await ask(tenant)).tools.some((t) => t.name === "run_shell"),
        tenant,
      );
  });

  it("with a policy, a request that names no tenant is refused rather than answered unfiltered", async () => {
    await assert.rejects(ask(""), (e: unknown) => e instanceof ConnectError && e.code === Code.InvalidArgument);
  });

  it("without a policy nothing is withheld", async () => {
    const res = await client.getAdmittedCatalog({ admissionProfile: "full", hostProfile: "generic", tenant: "locked" });
    assert.deepEqual(res.withheldTools, []);
  });
});

describe("loadToolPolicy", () => {
  it("a malformed policy stops start-up with a message naming the variable and the field", () => {
    const cases: Array<[string, RegExp]> = [
      ['{"tenants":{"acme":{"deny_tools":["run_shel"]}}}', /\/tenants\/acme\/deny_tools\/0 must be one of the known tool names \(WEBCODEX_TOOL_POLICY\)/],
      ['{"tenants":{"acme":{"deny_categories":["shell"]}}}', /\/tenants\/acme\/deny_categories\/0 must be one of the known categories/],
      ['{"tenants":{"acme":{"deny":["run_shell"]}}}', /\/tenants\/acme\/deny is not a known field/],
      ['{"client":{}}', /\/client is not a known field/],
      ['{"clients":{"x":{"allow_tools":"run_shell"}}}', /\/clients\/x\/allow_tools must be array/],
      ["{not json", /invalid tool policy: \/ is not JSON/],
    ];
    for (const [text, message] of cases) assert.throws(() => loadToolPolicy({ WEBCODEX_TOOL_POLICY: text }), message, text);
    assert.throws(
      () => loadToolPolicy({ WEBCODEX_TOOL_POLICY_FILE: "/nonexistent/policy.json" }),
      /WEBCODEX_TOOL_POLICY_FILE \/nonexistent\/policy.json: ENOENT/,
    );
    assert.throws(() => loadToolPolicy({ WEBCODEX_TOOL_POLICY: "{}", WEBCODEX_TOOL_POLICY_FILE: "/x" }), /not both/);
  });

  it("no policy configured is no policy; a valid one is returned as given", () => {
    assert.equal(loadToolPolicy({}), undefined);
    assert.deepEqual(loadToolPolicy({ WEBCODEX_TOOL_POLICY: '{"tenants":{"a":{"deny_tools":["run_shell"]}}}' }), {
      tenants: { a: { deny_tools: ["run_shell"] } },
    });
  });
});
