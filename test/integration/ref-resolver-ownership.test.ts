/**
 * Project owner and visibility in the ref-resolver against real Postgres: a Project with no
 * owner or visibility recorded (and its refs) is visible to its tenant; a declared
 * Project is private to its owner until shared; only the owner or a tenant admin may change
 * it; a name taken in the tenant cannot be declared by someone else.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@connectrpc/connect";
import { RefResolverService } from "@webcodex/proto";
import { createInProcessClient, createPostgresDatabase, principalHeaders } from "@webcodex/platform";
import type { Database, Principal } from "@webcodex/platform";
import { createRefResolver, migrateRefResolver } from "@webcodex/ref-resolver";
import { createTestDatabase } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

const as = (p: Principal) => ({ headers: principalHeaders(p) });
const alice: Principal = { clientId: "acme", subject: "alice" };
const bob: Principal = { clientId: "acme", subject: "bob" };
const admin: Principal = { clientId: "acme", subject: "root", tenantAdmin: true };
const foreignAdmin: Principal = { clientId: "evil", subject: "root", tenantAdmin: true };
const runner: Principal = { clientId: "acme", subject: "runner:r1" };

describe("ref-resolver: project owner and visibility", { timeout: 60_000 }, () => {
  let database: TestDatabase;
  let db: Database;
  let client: Client<typeof RefResolverService>;
  const listed = async (p: Principal) => (await client.listProjects({}, as(p))).projects.map((e) => e.project?.canonicalId).sort();
  const register = (projectId: string) => client.registerProject({ clientId: "acme", projectId, rootIdentity: `/w/${projectId}`, name: projectId }, as(runner));

  before(async () => {
    database = await createTestDatabase();
    db = createPostgresDatabase({ url: database.url, max: 5 });
    assert.deepEqual(await migrateRefResolver(db), ["0001_baseline"]);
    // A Project its Runner registered without a declaration (no owner, no visibility row), and a ref to it.
    await db.query(
      "INSERT INTO refs.projects (canonical_id, incarnation, client_id, project_id, root_identity, name) VALUES ('agent:acme:legacy', 1, 'acme', 'legacy', '/w/legacy', 'legacy')",
    );
    await db.query("INSERT INTO refs.ref_counters (client_id, subject, kind, last_code) VALUES ('acme', 'bob', 'project', 1)");
    await db.query("INSERT INTO refs.project_refs (client_id, subject, code, canonical_id, incarnation) VALUES ('acme', 'bob', 1, 'agent:acme:legacy', 1)");
    client = createInProcessClient(RefResolverService, createRefResolver({ db, liveCacheTtlMs: 0 }));
  });
  after(async () => {
    await db?.close();
    await database?.drop();
  });

  it("a Project with no owner or visibility recorded is shared with its tenant, with no owner, and its refs work", async () => {
    const resolved = await client.resolveProject({ selector: "~p1" }, as(bob));
    assert.equal(resolved.project?.canonicalId, "agent:acme:legacy");
    assert.deepEqual([resolved.project?.ownerSubject, resolved.project?.visibility], ["", "tenant"]);
    assert.ok((await listed(alice)).includes("agent:acme:legacy"));
    // Nobody owns it: it cannot become private.
    const privately = await client.updateProject({ selector: "agent:acme:legacy", visibility: "private" }, as(admin));
    assert.equal(privately.failure?.detailCode, "project_has_no_owner");
  });

  it("a declared Project is private to its owner once its Runner registers", async () => {
    assert.equal((await client.declareProject({ projectId: "alpha", name: "alpha", visibility: "private" }, as(alice))).failure, undefined);
    await register("alpha");
    assert.ok((await listed(alice)).includes("agent:acme:alpha"));
    assert.ok(!(await listed(bob)).includes("agent:acme:alpha"));
    assert.equal((await client.resolveProject({ selector: "agent:acme:alpha" }, as(bob))).failure?.reasonCode, "project_not_found");
    const own = await client.resolveProject({ selector: "agent:acme:alpha" }, as(alice));
    assert.deepEqual([own.project?.ownerSubject, own.project?.visibility], ["alice", "private"]);
  });

  it("another subject cannot take the name, while it is live or still being created", async () => {
    assert.equal((await client.declareProject({ projectId: "alpha", name: "alpha", visibility: "tenant" }, as(bob))).failure?.reasonCode, "project_exists");
    assert.equal((await client.declareProject({ projectId: "beta", name: "beta", visibility: "private" }, as(alice))).failure, undefined);
    assert.equal(
      (await client.declareProject({ projectId: "beta", name: "beta", visibility: "private" }, as(bob))).failure?.reasonCode,
      "project_exists",
      "pending: not yet registered",
    );
    assert.equal((await client.declareProject({ projectId: "no:pe", name: "x", visibility: "private" }, as(bob))).failure?.detailCode, "invalid_project_name");
  });

  it("owner and tenant admin may change visibility; a non-owner who sees it may not; another tenant's admin learns nothing", async () => {
    const byBob = await client.updateProject({ selector: "agent:acme:alpha", visibility: "tenant" }, as(bob));
    assert.equal(byBob.failure?.reasonCode, "project_not_found");
    const shared = await client.updateProject({ selector: "agent:acme:alpha", visibility: "tenant" }, as(alice));
    assert.deepEqual([shared.changed, shared.project?.visibility], [true, "tenant"]);
    assert.ok((await listed(bob)).includes("agent:acme:alpha"));
    assert.equal((await client.updateProject({ selector: "agent:acme:alpha", visibility: "private" }, as(bob))).failure?.reasonCode, "not_project_owner");
    assert.equal(
      (await client.updateProject({ selector: "agent:acme:alpha", visibility: "private" }, as(foreignAdmin))).failure?.reasonCode,
      "project_not_found",
    );
    const back = await client.updateProject({ selector: "agent:acme:alpha", visibility: "private" }, as(admin));
    assert.deepEqual([back.changed, back.project?.visibility], [true, "private"]);
    assert.ok(!(await listed(bob)).includes("agent:acme:alpha"));
    const again = await client.updateProject({ selector: "agent:acme:alpha", visibility: "private" }, as(admin));
    assert.equal(again.changed, false);
  });

  it("no table was dropped and the previous release's resolution functions still answer", async () => {
    const { rows } = await db.query<{ n: string }>("SELECT count(*) AS n FROM refs.resolve_live_project('agent:acme:legacy', 'acme', 'bob')");
    assert.equal(Number(rows[0]?.n), 1);
    const tables = (await db.query<{ t: string }>("SELECT table_name AS t FROM information_schema.tables WHERE table_schema='refs' ORDER BY 1")).rows.map(
      (r) => r.t,
    );
    for (const t of ["projects", "project_refs", "ref_counters", "hidden_projects", "sessions", "project_settings"]) assert.ok(tables.includes(t), t);
  });
});
