/**
 * People within one tenant: a real authorization server (oidc-provider) signs two people in
 * through the same OAuth client; `webcodex dev` puts both in one tenant (the client) as two
 * principals (tenant, subject). Each creates a private Project with create_project; neither
 * can see or address the other's (refs, canonical ids, Jobs, Sessions), exactly as if it did
 * not exist; sharing with the tenant makes it visible; only the owner or a tenant admin (a
 * group claim mapped to the role) may change it; rate limits are per person.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { decodeJwt } from "jose";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { toolDefinition } from "@webcodex/contracts";
import { callTool, connectMcp, executeFollowUp, createProjectDir, startDevServer, startUserAuthServer, tempDir } from "../support/index.js";
import type { DevServer, ToolOutcome, UserAuthServer } from "../support/index.js";

const CLIENT = "webcodex-host";
const PER_PERSON_PER_MINUTE = 60;

describe("principals within one tenant (two people, one OAuth client)", { timeout: 240_000 }, () => {
  let as: UserAuthServer;
  let server: DevServer;
  let alice: Client;
  let bob: Client;
  let carol: Client;
  let direct: Set<string>;
  const created: Record<string, { ref: string; id: string }> = {};

  /** A tool call as a Host makes it: directly when tools/list shows it, else through call_runtime_tool. */
  const call = (client: Client, tool: string, args: Record<string, unknown>): Promise<ToolOutcome> =>
    direct.has(tool) ? callTool(client, tool, args) : callTool(client, "call_runtime_tool", { tool, arguments: args });

  /** create_project, then its follow-up executed exactly as returned until the Project is ready. */
  async function createProject(client: Client, name: string, visibility?: string) {
    let outcome = await call(client, "create_project", { name, source: { empty: {} }, ...(visibility ? { visibility } : {}), wait_ms: 0 });
    assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
    assert.equal(outcome.result["project_id"], `agent:${CLIENT}:${name}`);
    for (let i = 0; i < 50 && outcome.result["project_state"] === "pending"; i++) {
      const followUp = outcome.result["follow_up"] as { follow_up_kind: string; tool: string; arguments: Record<string, unknown> };
      assert.equal(followUp.follow_up_kind, "mechanically_followable");
      outcome = await executeFollowUp(client, followUp);
      assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
    }
    assert.match(String(outcome.result["project_ref"]), /^~p\d+$/, JSON.stringify(outcome.result));
    return { ref: String(outcome.result["project_ref"]), id: String(outcome.result["project_id"]) };
  }

  const listed = async (client: Client) =>
    ((await callTool(client, "list_projects", {})).result["projects"] as Array<Record<string, string>>).map((p) => p["project_id"]).sort();

  before(async () => {
    as = await startUserAuthServer({
      clientId: CLIENT,
      scopes: "webcodex:read webcodex:write",
      extraClaims: (login) => (login === "carol" ? { groups: ["webcodex-admins"] } : { groups: ["developers"] }),
    });
    server = await startDevServer({
      projectDir: createProjectDir({ "README.md": "# shared\n" }, { name: "shared-repo" }),
      dataDir: tempDir("wcx-principals-data-"),
      env: {
        WEBCODEX_OAUTH_ISSUER: as.issuer,
        WEBCODEX_DEV_CLIENT_ID: CLIENT,
        WEBCODEX_OAUTH_ADMIN_CLAIM: "groups",
        WEBCODEX_OAUTH_ADMIN_VALUES: "webcodex-admins",
        WEBCODEX_RATE_LIMIT_PER_MINUTE: String(PER_PERSON_PER_MINUTE),
      },
    });
    const [a, b, c] = await Promise.all(["alice", "bob", "carol"].map((login) => as.userToken(login, server.mcpUrl)));
    assert.deepEqual(
      [decodeJwt(a ?? "").sub, decodeJwt(b ?? "").sub, decodeJwt(a ?? "").client_id, decodeJwt(b ?? "").client_id],
      ["alice", "bob", CLIENT, CLIENT],
      "two subjects of one client",
    );
    [alice, bob, carol] = await Promise.all([connectMcp(server.mcpUrl, a ?? ""), connectMcp(server.mcpUrl, b ?? ""), connectMcp(server.mcpUrl, c ?? "")]);
    direct = new Set((await alice.listTools()).tools.map((t) => t.name));
    created["alice"] = await createProject(alice, "alice-app");
    created["bob"] = await createProject(bob, "bob-app", "private");
  });
  after(async () => {
    await Promise.all([alice?.close(), bob?.close(), carol?.close()]);
    await server?.stop();
    await as?.close();
  });

  it("each sees its own private Project and the tenant's shared one, not the other's", async () => {
    const shared = `agent:${CLIENT}:shared-repo`;
    assert.deepEqual(await listed(alice), [`agent:${CLIENT}:alice-app`, shared]);
    assert.deepEqual(await listed(bob), [`agent:${CLIENT}:bob-app`, shared]);
    assert.deepEqual(await listed(carol), [shared], "a private Project is private to its owner, admins included");
  });

  it("neither can address the other's Project by ref or canonical id: the failure equals the one for a Project that does not exist", async () => {
    const bobWrote = await call(bob, "edit_project_files", {
      project: created["bob"]?.ref,
      changes: [{ kind: "create", path: "bob-secret.txt", content: "bob only\n" }],
    });
    assert.equal(bobWrote.isError, false, JSON.stringify(bobWrote.result));
    for (const tool of ["read_files", "list_project_files", "run_shell", "create_session", "read_workspace_changes"]) {
      const sample = tool === "read_files" ? { files: [{ path: "bob-secret.txt" }] } : tool === "run_shell" ? { command: "cat bob-secret.txt" } : {};
      const foreign = await call(alice, tool, { project: created["bob"]?.id, ...sample });
      const missing = await call(alice, tool, { project: `agent:${CLIENT}:no-such-project`, ...sample });
      assert.equal(foreign.result["reason_code"], "project_not_found", `${tool}: ${JSON.stringify(foreign.result)}`);
      assert.deepEqual(foreign, missing, `${tool}: "exists but private" must equal "does not exist"`);
    }
    // Bob's ref spelled by Alice is Alice's own selector: it never reaches Bob's Project.
    const viaRef = await call(alice, "read_files", { project: created["bob"]?.ref, files: [{ path: "bob-secret.txt" }] });
    assert.doesNotMatch(JSON.stringify(viaRef.result), /bob only/);
    const items = viaRef.result["items"] as Array<Record<string, unknown>> | undefined;
    assert.ok(
      viaRef.result["reason_code"] === "project_not_found" ||
        (items?.[0]?.["error"] as Record<string, unknown> | undefined)?.["reason_code"] === "path_not_found",
      JSON.stringify(viaRef.result),
    );
  });

  it("neither can observe the other's Jobs or use the other's Sessions", async () => {
    const job = await call(bob, "run_shell", { project: created["bob"]?.ref, command: "sleep 3", wait_ms: 50 });
    assert.equal(job.result["execution_state"], "pending", JSON.stringify(job.result));
    const jobId = String(job.result["job_id"]);
    const viaProject = await call(alice, "observe_jobs", { project: created["bob"]?.id, job_ids: [jobId] });
    assert.deepEqual(viaProject, await call(alice, "observe_jobs", { project: `agent:${CLIENT}:no-such-project`, job_ids: [jobId] }));
    // Bob's job id under Alice's own Project: a job that does not exist there.
    const viaOwn = await call(alice, "wait_for_job_terminal", { project: created["alice"]?.id, job_id: jobId, wait_ms: 0 });
    const absent = await call(alice, "wait_for_job_terminal", { project: created["alice"]?.id, job_id: "job_does_not_exist", wait_ms: 0 });
    assert.equal(viaOwn.result["reason_code"], "job_not_found", JSON.stringify(viaOwn.result));
    assert.deepEqual({ ...viaOwn.result, job_id: "" }, { ...absent.result, job_id: "" });
    const session = await call(bob, "create_session", { project: created["bob"]?.ref });
    for (const [selector, absent] of [
      [session.result["session_ref"], "~s77"],
      [session.result["session_id"], `wc_sess_${"0".repeat(32)}`],
    ] as const) {
      assert.deepEqual(await call(alice, "read_session_handoff", { session_id: selector }), await call(alice, "read_session_handoff", { session_id: absent }));
    }
  });

  it("only the owner or a tenant admin may change a Project; sharing with the tenant makes it visible to the other", async () => {
    const denied = await call(carol, "update_project", { project: created["alice"]?.id, visibility: "private" });
    assert.equal(denied.isError, false, `a tenant admin may change a private Project it names by canonical id: ${JSON.stringify(denied.result)}`);
    assert.deepEqual(denied.result, { project_id: created["alice"]?.id, visibility: "private", unchanged: true });
    const byBob = await call(bob, "update_project", { project: created["alice"]?.id, visibility: "tenant" });
    assert.deepEqual(
      byBob,
      await call(bob, "update_project", { project: `agent:${CLIENT}:no-such-project`, visibility: "tenant" }),
      "a non-owner learns nothing about a private Project",
    );
    const shared = await call(alice, "update_project", { project: created["alice"]?.ref, visibility: "tenant" });
    assert.deepEqual(shared.result, { project_id: created["alice"]?.id, visibility: "tenant" });
    assert.ok((await listed(bob)).includes(`agent:${CLIENT}:alice-app`), "bob sees the shared Project");
    const read = await call(bob, "list_project_files", { project: created["alice"]?.id });
    assert.equal(read.isError, false, JSON.stringify(read.result));
    // Visible is not owned: bob still may not change it; the admin may.
    const notOwner = await call(bob, "update_project", { project: created["alice"]?.id, visibility: "private" });
    assert.deepEqual([notOwner.result["reason_code"], notOwner.result["state_changed"]], ["not_project_owner", false]);
    const back = await call(carol, "update_project", { project: created["alice"]?.id, visibility: "private" });
    assert.deepEqual(back.result, { project_id: created["alice"]?.id, visibility: "private" });
    assert.ok(!(await listed(bob)).includes(`agent:${CLIENT}:alice-app`), "private again: bob no longer sees it");
    const bobsRef = await call(bob, "list_project_files", { project: created["alice"]?.id });
    assert.equal(bobsRef.result["reason_code"], "project_not_found");
  });

  it("a Task in a private Project cannot be assigned to an Agent of someone the Project is hidden from; in a shared one it can", async () => {
    const aliceAgent = await call(alice, "create_agent", { name: "alice-worker" });
    assert.equal(aliceAgent.isError, false, JSON.stringify(aliceAgent.result));
    const task = (project: string | undefined, assignee: unknown, key: string) =>
      call(bob, "create_agent_task", { project, title: "look", instructions: "the secret plan", assignee_agent_id: assignee, idempotency_key: key });
    const hidden = await task(created["bob"]?.ref, aliceAgent.result["agent_id"], "k1");
    const unknown = await task(created["bob"]?.ref, `wc_agent_${"0".repeat(32)}`, "k2");
    assert.equal(hidden.isError, true, JSON.stringify(hidden.result));
    assert.deepEqual(hidden, unknown, "answered exactly like an Agent that does not exist");
    const tasks = await call(alice, "list_agent_tasks", {});
    assert.doesNotMatch(JSON.stringify(tasks.result), /secret plan|bob-app/, "nothing of the private Project reaches alice");
    const shared = await task(`agent:${CLIENT}:shared-repo`, aliceAgent.result["agent_id"], "k3");
    assert.equal(shared.isError, false, JSON.stringify(shared.result));
  });

  it("a name taken in the tenant cannot be created again; update_project and create_project need the write scope", async () => {
    const again = await call(bob, "create_project", { name: "alice-app", source: { empty: {} } });
    assert.deepEqual([again.isError, again.result["reason_code"], again.result["state_changed"]], [true, "project_exists", false]);
    for (const tool of ["create_project", "update_project", "delete_project"]) assert.notEqual(toolDefinition(tool)?.effect, "read_only", tool);
  });

  it("rate limits are per person: one person over the limit does not slow the other", async () => {
    const dave = await connectMcp(server.mcpUrl, await as.userToken("dave", server.mcpUrl));
    try {
      let denied: ToolOutcome | undefined;
      for (let i = 0; i < PER_PERSON_PER_MINUTE + 5 && !denied; i++) {
        const outcome = await callTool(dave, "list_projects", {});
        if (outcome.isError) denied = outcome;
      }
      assert.ok(denied, "dave was limited");
      assert.deepEqual([denied.result["reason_code"], denied.result["detail_code"]], ["rate_limited", "principal_rate_limit"]);
      assert.equal((await callTool(alice, "list_projects", {})).isError, false, "alice, same tenant, is not affected");
    } finally {
      await dave.close();
    }
  });

  it("a tenant admin may delete a member's private Project by canonical id; another member learns nothing and deletes nothing", async () => {
    const scratch = await createProject(bob, "bob-scratch", "private");
    const byAlice = await call(alice, "delete_project", { project: scratch.id });
    assert.deepEqual([byAlice.isError, byAlice.result["reason_code"], byAlice.result["state_changed"]], [true, "project_not_found", false]);
    assert.ok((await listed(bob)).includes(scratch.id), "alice deleted nothing");
    const byAdmin = await call(carol, "delete_project", { project: scratch.id });
    assert.equal(byAdmin.isError, false, JSON.stringify(byAdmin.result));
    assert.deepEqual(byAdmin.result, { project_id: scratch.id });
    assert.ok(!(await listed(bob)).includes(scratch.id), "gone for its owner too");
  });
});
