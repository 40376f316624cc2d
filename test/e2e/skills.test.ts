/**
 * Agent Skills through the real path (MCP SDK client → gateway → ref-resolver + broker →
 * the project's Runner for project skills; the gateway for the tenant's catalog), on
 * `webcodex dev` and on the distributed stack: a project with 3 skills and a tenant catalog
 * with 2 (one shadowed) lists 4 with their sources; an invalid SKILL.md is listed with its
 * reason; read_skill bodies are byte-identical to the files, and a body over the limit is
 * reassembled exactly by following next_offset as returned; a 500-skill catalog pages within
 * the budget with omitted counts and no duplicate or gap; another tenant's catalog and another
 * principal's private project are never visible (the latter fails like a missing project);
 * every bootstrap field a Host gets at initialize fits the 1,536-character ceiling.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { BUILTIN_BOOTSTRAP_GUIDANCE_MAX_CHARS, SKILLS_BOOTSTRAP_HINT, toolDefinition, toolLimit } from "@webcodex/contracts";
import type { DistributedStack } from "@webcodex/cli";
import { backingServices, callTool, connectMcp, createProjectDir, createTestDatabase, startDevServer, startTestStack, tempDir } from "../support/index.js";
import type { DevServer, TestDatabase, ToolOutcome } from "../support/index.js";

type Json = Record<string, unknown>;

const skillMd = (name: string, description: string, body = `# ${name}\n\nFollow these steps.\n`) =>
  `---\nname: ${name}\ndescription: ${description}\n---\n${body}`;
/** A body well over read_skill's limit, with multi-byte characters on the cut lines. */
const longBody = Array.from({ length: Math.ceil((toolLimit("read_skill", "body_bytes") * 2.3) / 40) }, (_, i) => `Step ${i}: vérifier ✓ the change 😀\n`).join(
  "",
);

const PROJECT_FILES: Record<string, string> = {
  "README.md": "# skills fixture\n",
  ".agents/skills/deploy/SKILL.md": skillMd("deploy", "Deploy this project (project version)."),
  ".agents/skills/review/SKILL.md": skillMd("review", "Review a change the project's way.", longBody),
  ".claude/skills/testing/SKILL.md": skillMd("testing", "Run the project's tests."),
  ".claude/skills/testing/scripts/run.sh": "npm test\n",
};

/** `<dir>/<tenant>/<skill>/...`: the operator's catalogs, one directory per tenant. */
function writeCatalogs(tenant: string): string {
  const dir = tempDir("wcx-skill-catalogs-");
  const put = (rel: string, text: string) => {
    mkdirSync(join(dir, rel, ".."), { recursive: true });
    writeFileSync(join(dir, rel), text);
  };
  put(`${tenant}/deploy/SKILL.md`, skillMd("deploy", "Deploy (company version)."));
  put(`${tenant}/style/SKILL.md`, skillMd("style", "The company's code style."));
  put(`${tenant}/style/references/guide.md`, "# Style guide\n\nTabs are a choice.\n");
  put("globex/secret-plan/SKILL.md", skillMd("secret-plan", "Globex only."));
  for (let i = 0; i < 500; i++) {
    const name = `bulk-${String(i).padStart(3, "0")}`;
    put(`bulk/${name}/SKILL.md`, skillMd(name, `Bulk skill number ${i}, with a description of ordinary length.`));
  }
  return dir;
}

/** A Gateway tool as a Host that knows only tools/list calls it; a success carries only the fields its ToolDefinition declares. */
async function runtime(client: Client, tool: string, args: Json): Promise<ToolOutcome> {
  const outcome = await callTool(client, "call_runtime_tool", { tool, arguments: args });
  const declared = new Set([...(toolDefinition(tool)?.resultFields ?? []), "input_normalization", "job_attention", "follow_up"]);
  if (!outcome.isError) for (const key of Object.keys(outcome.result)) assert.ok(declared.has(key), `${tool}: result field ${key} is declared`);
  return outcome;
}
const rows = (o: ToolOutcome) => (o.result["skills"] ?? []) as Json[];

interface Principals {
  owner: Client;
  /** Same tenant, another subject (absent where the stack cannot create a private project). */
  peer?: Client;
  /** Another tenant with its own catalog. */
  other: Client;
  /** A tenant whose catalog has 500 skills. */
  bulk: Client;
  projectDir: string;
  catalogs: string;
  tenant: string;
}

/** The checks both modes run. */
function skillScenario(p: () => Principals) {
  let project = "";
  before(async () => {
    project = String((((await callTool(p().owner, "list_projects", {})).result["projects"] as Json[])[0] ?? {})["project_ref"]);
  });

  it("lists the project's 3 skills and the tenant's 2, the shadowed one once, each with its source", async () => {
    const { owner } = p();
    const listed = await runtime(owner, "list_skills", { project });
    assert.equal(listed.isError, false, JSON.stringify(listed.result));
    assert.deepEqual(
      rows(listed).map((s) => [s["name"], s["source"], s["valid"], s["shadows"]]),
      [
        ["deploy", "project", true, ["tenant"]],
        ["review", "project", true, undefined],
        ["style", "tenant", true, undefined],
        ["testing", "project", true, undefined],
      ],
    );
    assert.equal(listed.result["omitted"], undefined);
    assert.equal(listed.result["next_cursor"], undefined);
    // Without a project: the tenant's catalog alone.
    const tenantOnly = await runtime(owner, "list_skills", {});
    assert.deepEqual(
      rows(tenantOnly).map((s) => [s["name"], s["source"]]),
      [
        ["deploy", "tenant"],
        ["style", "tenant"],
      ],
    );
  });

  it("read_skill returns the file byte for byte; the revision matches the catalog's", async () => {
    const { owner, projectDir, catalogs, tenant } = p();
    const listed = rows(await runtime(owner, "list_skills", { project }));
    const deploy = await runtime(owner, "read_skill", { project, skill: "deploy" });
    assert.equal(deploy.isError, false, JSON.stringify(deploy.result));
    assert.deepEqual(
      [deploy.result["source"], deploy.result["complete"], deploy.result["next_offset"], deploy.result["revision"]],
      ["project", true, undefined, listed.find((s) => s["name"] === "deploy")?.["revision"]],
    );
    assert.equal(deploy.result["body"], readFileSync(join(projectDir, ".agents/skills/deploy/SKILL.md"), "utf8"));
    const testing = await runtime(owner, "read_skill", { project, skill: "testing" });
    assert.deepEqual(testing.result["resources"], [{ path: ".claude/skills/testing/scripts/run.sh", bytes: 9 }]);
    // A project resource is read like any project file, at the path given.
    const script = await callTool(owner, "read_files", { project, files: [{ path: ".claude/skills/testing/scripts/run.sh" }] });
    assert.equal((script.result["items"] as Json[])[0]?.["content"], "npm test\n");
    // A tenant skill: its resources are read through read_skill {resource}.
    const style = await runtime(owner, "read_skill", { project, skill: "style" });
    assert.equal(style.result["source"], "tenant");
    assert.equal(style.result["body"], readFileSync(join(catalogs, tenant, "style/SKILL.md"), "utf8"));
    const resources = style.result["resources"] as Json[];
    assert.deepEqual(resources, [{ path: "references/guide.md", bytes: statSync(join(catalogs, tenant, "style/references/guide.md")).size }]);
    const guide = await runtime(owner, "read_skill", { project, skill: "style", resource: resources[0]?.["path"] });
    assert.equal(guide.result["body"], readFileSync(join(catalogs, tenant, "style/references/guide.md"), "utf8"));
    const missing = await runtime(owner, "read_skill", { project, skill: "no-such-skill" });
    assert.deepEqual([missing.isError, missing.result["reason_code"]], [true, "skill_not_found"]);
  });

  it("a body over the limit is cut, and following next_offset as returned yields the rest exactly", async () => {
    const { owner, projectDir } = p();
    const file = readFileSync(join(projectDir, ".agents/skills/review/SKILL.md"));
    assert.ok(file.length > toolLimit("read_skill", "body_bytes") * 2);
    let args: Json = { project, skill: "review" };
    let body = "";
    let calls = 0;
    let revision: unknown;
    for (;;) {
      const r = await runtime(owner, "read_skill", args);
      assert.equal(r.isError, false, JSON.stringify(r.result));
      calls++;
      assert.ok(Buffer.byteLength(String(r.result["body"])) <= toolLimit("read_skill", "body_bytes"));
      revision ??= r.result["revision"];
      assert.equal(r.result["revision"], revision, "one revision across the slices of one file");
      body += String(r.result["body"]);
      if (r.result["complete"] === true) break;
      assert.equal(typeof r.result["next_offset"], "number");
      args = { ...args, offset: r.result["next_offset"] };
    }
    assert.equal(calls, 3);
    assert.ok(Buffer.from(body, "utf8").equals(file), "the slices reassemble to the exact file");
  });

  it("an invalid SKILL.md written into the project is listed as invalid with its reason, never dropped", async () => {
    const { owner } = p();
    const created = await callTool(owner, "edit_project_files", {
      project,
      changes: [
        { kind: "create", path: ".agents/skills/broken/SKILL.md", content: "---\nname: broken\n---\nNo description.\n" },
        { kind: "create", path: ".claude/skills/misnamed/SKILL.md", content: skillMd("other-name", "Name differs from folder.") },
      ],
    });
    assert.equal(created.isError, false, JSON.stringify(created.result));
    const listed = rows(await runtime(owner, "list_skills", { project }));
    assert.deepEqual(
      listed.map((s) => s["name"]),
      ["broken", "deploy", "misnamed", "review", "style", "testing"],
    );
    const broken = listed.find((s) => s["name"] === "broken") ?? {};
    const misnamed = listed.find((s) => s["name"] === "misnamed") ?? {};
    assert.deepEqual([broken["valid"], String(broken["problem"]).split(":")[0]], [false, "description_missing"]);
    assert.deepEqual([misnamed["valid"], String(misnamed["problem"]).split(":")[0]], [false, "name_mismatch"]);
  });

  it("500 skills: each page fits the catalog budget and says how many it left out; its cursor walks the rest with no duplicate or gap", async () => {
    const { bulk } = p();
    const seen: string[] = [];
    let args: Json = {};
    let pages = 0;
    for (;;) {
      const page = await runtime(bulk, "list_skills", args);
      assert.equal(page.isError, false, JSON.stringify(page.result));
      pages++;
      assert.ok(Buffer.byteLength(JSON.stringify(page.result["skills"])) <= toolLimit("list_skills", "catalog_bytes"));
      seen.push(...rows(page).map((s) => String(s["name"])));
      assert.equal(page.result["omitted"] ?? 0, 500 - seen.length);
      if (page.result["next_cursor"] === undefined) break;
      args = { cursor: page.result["next_cursor"] };
    }
    assert.ok(pages >= 5, `${pages} pages`);
    assert.deepEqual(
      seen,
      Array.from({ length: 500 }, (_, i) => `bulk-${String(i).padStart(3, "0")}`),
    );
  });

  it("another tenant's catalog is never visible, and its principals cannot read this project's skills (fails like a missing project)", async () => {
    const { owner, other, tenant } = p();
    assert.ok(!rows(await runtime(owner, "list_skills", {})).some((s) => s["name"] === "secret-plan"));
    const secret = await runtime(owner, "read_skill", { skill: "secret-plan" });
    assert.deepEqual([secret.isError, secret.result["reason_code"]], [true, "skill_not_found"]);
    assert.deepEqual(
      rows(await runtime(other, "list_skills", {})).map((s) => s["name"]),
      ["secret-plan"],
    );
    const canonical = String((((await callTool(owner, "list_projects", {})).result["projects"] as Json[])[0] ?? {})["project_id"]);
    const foreign = await runtime(other, "list_skills", { project: canonical });
    const missing = await runtime(other, "list_skills", { project: `agent:${tenant}:no-such-project` });
    assert.equal(foreign.isError, true);
    assert.deepEqual(
      [foreign.result["reason_code"], foreign.result["detail_code"], foreign.result["failure_stage"]],
      [missing.result["reason_code"], missing.result["detail_code"], missing.result["failure_stage"]],
    );
    assert.equal(foreign.result["reason_code"], "project_not_found");
    const foreignRead = await runtime(other, "read_skill", { project: canonical, skill: "deploy" });
    assert.deepEqual([foreignRead.isError, foreignRead.result["reason_code"]], [true, "project_not_found"]);
  });

  it("every bootstrap field a Host gets at initialize fits the 1,536-character ceiling; the instructions carry the skills hint", async () => {
    const { owner } = p();
    const instructions = owner.getInstructions() ?? "";
    assert.ok(instructions.includes(SKILLS_BOOTSTRAP_HINT));
    const fields: Array<[string, string]> = [["instructions", instructions]];
    const collect = (value: unknown, at: string) => {
      if (typeof value === "string") fields.push([at, value]);
      else if (value && typeof value === "object") for (const [k, v] of Object.entries(value)) collect(v, `${at}.${k}`);
    };
    collect(owner.getServerVersion(), "serverInfo");
    assert.ok(fields.length >= 3);
    for (const [at, value] of fields) assert.ok(value.length <= BUILTIN_BOOTSTRAP_GUIDANCE_MAX_CHARS, `${at} is ${value.length} characters`);
  });
}

function tokensFile(tenant: string): { file: string; tokens: Record<string, string> } {
  const tokens = {
    owner: `owner-${tenant}-token-0123456789abcdef`,
    peer: `peer-${tenant}-token-0123456789abcdefg`,
    other: "other-globex-token-0123456789abcdef",
    bulk: "bulk-tenant-token-0123456789abcdefgh",
  };
  const dir = tempDir("wcx-skill-tokens-");
  writeFileSync(
    join(dir, "tokens.json"),
    JSON.stringify({
      tokens: [
        { token: tokens.owner, client_id: tenant, subject: "alice" },
        { token: tokens.peer, client_id: tenant, subject: "bob" },
        { token: tokens.other, client_id: "globex", subject: "eve" },
        { token: tokens.bulk, client_id: "bulk", subject: "bea" },
      ],
    }),
  );
  return { file: join(dir, "tokens.json"), tokens };
}

describe("skills on webcodex dev (embedded)", { timeout: 240_000 }, () => {
  const tenant = "acme";
  let server: DevServer;
  let clients: Client[] = [];
  let principals: Principals;

  before(async () => {
    const { file, tokens } = tokensFile(tenant);
    const catalogs = writeCatalogs(tenant);
    const projectDir = createProjectDir(PROJECT_FILES, { name: "skills-fixture" });
    server = await startDevServer({ projectDir, dataDir: tempDir("wcx-skills-data-"), tokensFile: file, env: { WEBCODEX_SKILL_CATALOGS_DIR: catalogs } });
    clients = await Promise.all([tokens.owner, tokens.peer, tokens.other, tokens.bulk].map((t) => connectMcp(server.mcpUrl, t as string)));
    const [owner, peer, other, bulk] = clients as [Client, Client, Client, Client];
    principals = { owner, peer, other, bulk, projectDir, catalogs, tenant };
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await server?.stop();
  });

  skillScenario(() => principals);

  it("another principal's private project in the same tenant: its skills fail exactly like a missing project's", async () => {
    const { owner, peer } = principals as Required<Principals>;
    const created = await runtime(owner, "create_project", { name: "private-skills", source: { empty: {} } });
    assert.equal(created.isError, false, JSON.stringify(created.result));
    const id = String(created.result["project_id"]);
    const write = await callTool(owner, "edit_project_files", {
      project: created.result["project_ref"],
      changes: [{ kind: "create", path: ".agents/skills/hidden/SKILL.md", content: skillMd("hidden", "Private.") }],
    });
    assert.equal(write.isError, false, JSON.stringify(write.result));
    const mine = rows(await runtime(owner, "list_skills", { project: id }));
    assert.ok(mine.some((s) => s["name"] === "hidden" && s["source"] === "project"));
    for (const [tool, extra] of [
      ["list_skills", {}],
      ["read_skill", { skill: "hidden" }],
    ] as const) {
      const foreign = await runtime(peer, tool, { project: id, ...extra });
      const missing = await runtime(peer, tool, { project: `agent:${tenant}:never-created`, ...extra });
      assert.equal(foreign.isError, true);
      const shape = (o: ToolOutcome) => [o.result["reason_code"], o.result["detail_code"], o.result["failure_stage"], o.result["state_changed"]];
      assert.deepEqual(shape(foreign), shape(missing), tool);
      assert.equal(foreign.result["reason_code"], "project_not_found");
      assert.ok(!JSON.stringify(foreign.result).includes("hidden"));
    }
  });
});

describe("skills on the distributed stack", { timeout: 240_000 }, () => {
  const tenant = "local";
  let db: TestDatabase;
  let stack: DistributedStack;
  let clients: Client[] = [];
  let principals: Principals;

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    const { file, tokens } = tokensFile(tenant);
    const catalogs = writeCatalogs(tenant);
    const projectDir = createProjectDir(PROJECT_FILES, { name: "skills-dist" });
    stack = await startTestStack({
      postgresUrl: db.url,
      redisUrl: services.redisUrl,
      projectDir,
      gatewayEnv: { WEBCODEX_DEV_TOKENS_FILE: file, WEBCODEX_SKILL_CATALOGS_DIR: catalogs },
    });
    clients = await Promise.all([tokens.owner, tokens.other, tokens.bulk].map((t) => connectMcp(stack.mcpUrl, t as string)));
    const [owner, other, bulk] = clients as [Client, Client, Client];
    principals = { owner, other, bulk, projectDir, catalogs, tenant };
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await stack?.stop();
    await db?.drop();
  });

  skillScenario(() => principals);
});
