/**
 * ref-resolver against real Postgres: durable project refs across process restarts,
 * principal isolation, incarnations, retirement and visibility, concurrent issuance, and
 * the constraints that make recycling impossible.
 *
 * One concept over 400 lines: the ref-resolver's Project and ref contract.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RefResolverService } from "@webcodex/proto";
import { createInProcessClient, createPostgresDatabase, principalHeaders } from "@webcodex/platform";
import type { Database, Principal } from "@webcodex/platform";
import { createRefResolver, migrateRefResolver } from "@webcodex/ref-resolver";
import { createTestDatabase } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

type RefClient = Client<typeof RefResolverService>;
const as = (p: Principal) => ({ headers: principalHeaders(p) });
const runner: Principal = { clientId: "acme", subject: "runner:r1" };
const alice: Principal = { clientId: "acme", subject: "alice" };
const bob: Principal = { clientId: "acme", subject: "bob" };
const mallory: Principal = { clientId: "evil", subject: "mallory" };

interface Env {
  database: TestDatabase;
  db: Database;
  client: RefClient;
  close(): Promise<void>;
}

async function setup(): Promise<Env> {
  const database = await createTestDatabase();
  const db = createPostgresDatabase({ url: database.url, max: 20 });
  await migrateRefResolver(db);
  const client = createInProcessClient(RefResolverService, createRefResolver({ db }));
  return {
    database,
    db,
    client,
    close: async () => {
      await db.close();
      await database.drop();
    },
  };
}

const register = (client: RefClient, projectId: string, root: string, clientId = "acme") =>
  client.registerProject({ clientId, projectId, rootIdentity: root, name: projectId }, as({ clientId, subject: "runner:r1" }));

/** Runs one agent tool through the RPC the gateway uses; a failure throws. */
async function agentTool(client: RefClient, p: Principal, tool: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await client.callAgentTool({ tool, argumentsJson: JSON.stringify(args) }, as(p));
  if (res.failure) throw new Error(`${tool}: ${res.failure.reasonCode} ${res.failure.detailCode}`);
  return JSON.parse(res.resultJson) as Record<string, unknown>;
}

async function refsOf(client: RefClient, p: Principal): Promise<Record<string, string>> {
  const res = await client.listProjects({}, as(p));
  return Object.fromEntries(res.projects.map((e) => [e.project?.canonicalId ?? "", e.projectRef]));
}

/** The ref-resolver as a real process (its own pool), found by the URL it logs. */
async function startProcess(postgresUrl: string): Promise<{ url: string; child: ChildProcess; stop(): Promise<void> }> {
  const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
  const child = spawn(process.execPath, ["--input-type=module", "-e", "const m = await import('@webcodex/ref-resolver'); await m.main();"], {
    cwd: repoRoot,
    env: { ...process.env, WEBCODEX_POSTGRES_URL: postgresUrl, WEBCODEX_PORT: "0", WEBCODEX_HOST: "127.0.0.1", WEBCODEX_LOG_LEVEL: "info" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let buffered = "";
    const timer = setTimeout(() => reject(new Error(`ref-resolver did not start: ${buffered}`)), 20_000);
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      buffered += chunk;
      const match = /"url":"(http:\/\/[^"]+)"/.exec(buffered);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`ref-resolver exited ${code}: ${buffered}`));
    });
  });
  return {
    url,
    child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

describe("ref-resolver: durable project refs", () => {
  let env: Env;
  before(async () => {
    env = await setup();
  });
  after(async () => {
    await env.close();
  });

  it("refs survive a restart of the service process: same ref, same canonical id, same pinned targets", async () => {
    const database = await createTestDatabase();
    try {
      const first = await startProcess(database.url);
      let startArgs: Record<string, unknown> = {};
      let firstStart: Record<string, unknown> = {};
      let before: {
        projectRef: string;
        canonicalId: string;
        incarnation: bigint;
        sessionRef: string;
        sessionId: string;
        continuationRef: string;
        attemptRef: string;
        attemptId: string;
      };
      try {
        const client = createClient(RefResolverService, createConnectTransport({ baseUrl: first.url, httpVersion: "2" }));
        await register(client, "alpha", "/srv/alpha");
        await register(client, "beta", "/srv/beta");
        const refs = await refsOf(client, alice);
        assert.deepEqual(refs, { "agent:acme:alpha": "~p1", "agent:acme:beta": "~p2" });
        const resolved = await client.resolveProject({ selector: "~p1" }, as(alice));
        const session = await client.createSession({ projectSelector: "~p2", title: "restart" }, as(alice));
        const endpoint = await client.rotateAgentEndpoint({ agentId: "agent-1", endpointId: "ep-1", expectedControllerGeneration: 0n }, as(alice));
        const agent = await agentTool(client, alice, "create_agent", { name: "worker" });
        const task = await agentTool(client, alice, "create_agent_task", {
          project: "~p2",
          title: "t",
          instructions: "i",
          assignee_agent_id: agent["agent_id"],
          idempotency_key: "task-k1",
        });
        const attempt = await agentTool(client, alice, "start_agent_task_attempt", {
          task_id: task["task_id"],
          assignee_agent_id: agent["agent_id"],
          idempotency_key: "k1",
        });
        startArgs = { task_id: task["task_id"], assignee_agent_id: agent["agent_id"], idempotency_key: "k1" };
        firstStart = attempt;
        before = {
          projectRef: "~p1",
          canonicalId: resolved.project?.canonicalId ?? "",
          incarnation: resolved.project?.incarnation ?? 0n,
          sessionRef: session.sessionRef,
          sessionId: session.session?.sessionId ?? "",
          continuationRef: endpoint.agentContinuationRef,
          attemptRef: String(attempt["attempt_ref"]),
          attemptId: String(attempt["attempt_id"]),
        };
        assert.equal(before.sessionRef, "~s1");
        assert.equal(before.continuationRef, "~a1");
        assert.equal(before.attemptRef, "~t1");
      } finally {
        await first.stop();
      }
      assert.equal(first.child.exitCode, 0, "graceful shutdown");

      const second = await startProcess(database.url);
      try {
        const client = createClient(RefResolverService, createConnectTransport({ baseUrl: second.url, httpVersion: "2" }));
        const project = await client.resolveProject({ selector: before.projectRef }, as(alice));
        assert.equal(project.failure, undefined);
        assert.equal(project.project?.canonicalId, before.canonicalId);
        assert.equal(project.project?.incarnation, before.incarnation);
        assert.deepEqual(await refsOf(client, alice), { "agent:acme:alpha": "~p1", "agent:acme:beta": "~p2" }, "listing again issues nothing new");
        const session = await client.resolveSession({ selector: before.sessionRef, requireOpen: true }, as(alice));
        assert.equal(session.session?.sessionId, before.sessionId);
        assert.equal(session.session?.projectCanonicalId, "agent:acme:beta");
        const continuation = await client.resolveAgentContinuation({ agentContinuationRef: before.continuationRef }, as(alice));
        assert.deepEqual(
          [continuation.continuation?.agentId, continuation.continuation?.endpointId, continuation.continuation?.controllerGeneration],
          ["agent-1", "ep-1", 1n],
        );
        // Keyed replay across the restart: the first result exactly (same ids, fence and ref).
        assert.deepEqual(await agentTool(client, alice, "start_agent_task_attempt", startArgs), firstStart);
        // A new issuance continues the counter; nothing restarts from 1.
        await register(client, "gamma", "/srv/gamma");
        assert.equal((await refsOf(client, alice))["agent:acme:gamma"], "~p3");
        const another = await client.createSession({ projectSelector: "~p3" }, as(alice));
        assert.equal(another.sessionRef, "~s2");
      } finally {
        await second.stop();
      }
    } finally {
      await database.drop();
    }
  });

  it("principal B can neither resolve nor detect principal A's refs: every answer equals a never-issued one", async () => {
    const { client } = env;
    await register(client, "secret", "/srv/secret");
    await register(client, "other", "/srv/other", "evil");
    const aliceRefs = await refsOf(client, alice);
    const aliceRef = aliceRefs["agent:acme:secret"] ?? "";
    assert.match(aliceRef, /^~p\d+$/);

    // Same tenant, other subject: bob has no refs yet, so alice's ~pN is unknown to him.
    const foreign = await client.resolveProject({ selector: aliceRef }, as(bob));
    const never = await client.resolveProject({ selector: "~p999999" }, as(bob));
    assert.equal(foreign.failure?.reasonCode, "project_not_found");
    assert.deepEqual(foreign, never);
    const issuedForeign = await client.issueProjectRef({ selector: aliceRef }, as(bob));
    const issuedNever = await client.issueProjectRef({ selector: "~p999999" }, as(bob));
    assert.deepEqual(issuedForeign, issuedNever);

    // Another tenant: alice's ref and her canonical id both look exactly like nothing.
    for (const [selector, baseline] of [
      [aliceRef, "~p999999"],
      ["agent:acme:secret", "agent:acme:does-not-exist"],
    ] as const) {
      const a = await client.resolveProject({ selector }, as(mallory));
      const b = await client.resolveProject({ selector: baseline }, as(mallory));
      assert.equal(a.failure?.reasonCode, "project_not_found");
      assert.deepEqual(a, b, selector);
      // Creating a Session through it reveals nothing either.
      assert.deepEqual(
        await client.createSession({ projectSelector: selector }, as(mallory)),
        await client.createSession({ projectSelector: baseline }, as(mallory)),
      );
    }
    assert.deepEqual(Object.keys(await refsOf(client, mallory)), ["agent:evil:other"]);

    // Bob's own listing gives him his own ref for the same project: a different mapping.
    const bobRef = (await refsOf(client, bob))["agent:acme:secret"];
    assert.ok(bobRef);
    const bobResolved = await client.resolveProject({ selector: bobRef }, as(bob));
    assert.equal(bobResolved.project?.canonicalId, "agent:acme:secret");
  });

  it("re-registering a project root: the old ref fails closed (stale_ref) and a new ref is issued, never a reused one", async () => {
    const { client, db } = env;
    const carol: Principal = { clientId: "acme", subject: "carol" };
    await register(client, "moving", "/srv/moving-1");
    const first = (await refsOf(client, carol))["agent:acme:moving"] ?? "";
    assert.equal((await client.resolveProject({ selector: first }, as(carol))).project?.rootIdentity, "/srv/moving-1");

    const moved = await register(client, "moving", "/srv/moving-2");
    assert.equal(moved.newIncarnation, true);
    assert.equal(moved.project?.incarnation, 2n);
    const stale = await client.resolveProject({ selector: first }, as(carol));
    assert.equal(stale.project, undefined);
    assert.equal(stale.failure?.reasonCode, "stale_ref");
    assert.equal(stale.failure?.detailCode, "project_incarnation_changed");
    assert.match(stale.failure?.evidenceJson ?? "", /"tool":"list_projects"/);

    const second = (await refsOf(client, carol))["agent:acme:moving"] ?? "";
    assert.notEqual(second, first);
    assert.equal((await client.resolveProject({ selector: second }, as(carol))).project?.rootIdentity, "/srv/moving-2");

    // Back to the first root: still a new incarnation and a third ref; the first stays stale.
    await register(client, "moving", "/srv/moving-1");
    const third = (await refsOf(client, carol))["agent:acme:moving"] ?? "";
    assert.ok(![first, second].includes(third));
    assert.equal((await client.resolveProject({ selector: first }, as(carol))).failure?.reasonCode, "stale_ref");
    assert.equal((await client.resolveProject({ selector: second }, as(carol))).failure?.reasonCode, "stale_ref");
    // The stored pins never moved.
    const pins = await db.query<{ code: string; incarnation: string }>(
      `SELECT code, incarnation FROM refs.project_refs WHERE client_id='acme' AND subject='carol' AND canonical_id='agent:acme:moving' ORDER BY code`,
    );
    assert.deepEqual(
      pins.rows.map((r) => [`~p${r.code}`, Number(r.incarnation)]),
      [
        [first, 1],
        [second, 2],
        [third, 3],
      ],
    );
  });

  it("a retired project disappears: its refs go stale, its canonical id is not found, and it is not listed", async () => {
    const { client } = env;
    const dave: Principal = { clientId: "acme", subject: "dave" };
    await register(client, "retiring", "/srv/retiring");
    const ref = (await refsOf(client, dave))["agent:acme:retiring"] ?? "";
    const retired = await client.retireProject({ clientId: "acme", projectId: "retiring" }, as(runner));
    assert.equal(retired.retired, true);
    assert.equal((await client.retireProject({ clientId: "acme", projectId: "retiring" }, as(runner))).retired, false, "retiring twice is a no-op");
    const stale = await client.resolveProject({ selector: ref }, as(dave));
    assert.equal(stale.failure?.reasonCode, "stale_ref");
    assert.equal(stale.failure?.detailCode, "project_unavailable");
    assert.equal((await client.resolveProject({ selector: "agent:acme:retiring" }, as(dave))).failure?.reasonCode, "project_not_found");
    assert.equal((await refsOf(client, dave))["agent:acme:retiring"], undefined);
    // Registering it again (same root) is a new incarnation with a new ref; the old one stays stale.
    const again = await register(client, "retiring", "/srv/retiring");
    assert.equal(again.newIncarnation, true);
    const fresh = (await refsOf(client, dave))["agent:acme:retiring"];
    assert.notEqual(fresh, ref);
    assert.equal((await client.resolveProject({ selector: ref }, as(dave))).failure?.reasonCode, "stale_ref");
    // Another client id cannot retire it.
    await assert.rejects(
      client.retireProject({ clientId: "acme", projectId: "retiring" }, as(mallory)),
      (e: unknown) => ConnectError.from(e).code === Code.PermissionDenied,
    );
  });

  it("a project hidden from one subject is invisible to that subject only, and its same ref works again when shown", async () => {
    const { client } = env;
    const erin: Principal = { clientId: "acme", subject: "erin" };
    const frank: Principal = { clientId: "acme", subject: "frank" };
    await register(client, "shared", "/srv/shared");
    const erinRef = (await refsOf(client, erin))["agent:acme:shared"] ?? "";
    const frankRef = (await refsOf(client, frank))["agent:acme:shared"] ?? "";
    assert.equal((await client.setProjectVisibility({ clientId: "acme", projectId: "shared", subject: "erin", visible: false }, as(runner))).changed, true);

    const hidden = await client.resolveProject({ selector: erinRef }, as(erin));
    assert.equal(hidden.failure?.reasonCode, "stale_ref");
    assert.equal(hidden.failure?.detailCode, "project_unavailable", "hidden and retired look the same");
    assert.deepEqual(
      await client.resolveProject({ selector: "agent:acme:shared" }, as(erin)),
      await client.resolveProject({ selector: "agent:acme:nothing" }, as(erin)),
    );
    assert.equal((await refsOf(client, erin))["agent:acme:shared"], undefined);
    assert.equal((await client.resolveProject({ selector: frankRef }, as(frank))).project?.canonicalId, "agent:acme:shared");

    assert.equal((await client.setProjectVisibility({ clientId: "acme", projectId: "shared", subject: "erin", visible: true }, as(runner))).changed, true);
    assert.equal((await client.resolveProject({ selector: erinRef }, as(erin))).project?.canonicalId, "agent:acme:shared");
    assert.equal((await refsOf(client, erin))["agent:acme:shared"], erinRef, "same incarnation, same ref");
  });

  it("10,000 concurrent issuances for one principal across 4 replicas: no duplicate, no gap, no reuse", async (t) => {
    const database = await createTestDatabase();
    // 4 replicas with their own caches and 5-connection pools (20 connections); all 12,000
    // requests are in flight at once and wait in the pools' queues.
    const pools = Array.from({ length: 4 }, () => createPostgresDatabase({ url: database.url, max: 5, connectionTimeoutMs: 120_000 }));
    const [db] = pools as [Database, ...Database[]];
    try {
      await migrateRefResolver(db);
      const n = 10_000;
      await db.query(
        `INSERT INTO refs.projects (canonical_id, incarnation, client_id, project_id, root_identity, name)
         SELECT 'agent:bulk:p' || i, 1, 'bulk', 'p' || i, '/srv/p' || i, 'p' || i FROM generate_series(1, $1::int) AS i`,
        [n],
      );
      const replicas = pools.map((pool) => createInProcessClient(RefResolverService, createRefResolver({ db: pool })));
      const who: Principal = { clientId: "bulk", subject: "agent" };
      // Every project once, plus 2,000 repeated requests (on other replicas) racing their first issuance.
      const targets = [...Array.from({ length: n }, (_, i) => i + 1), ...Array.from({ length: 2_000 }, (_, i) => ((i * 7919) % n) + 1)];
      const started = performance.now();
      const results = await Promise.all(
        targets.map(async (i, k) => {
          const r = await (replicas[k % replicas.length] as RefClient).issueProjectRef({ selector: `agent:bulk:p${i}` }, as(who));
          assert.equal(r.failure, undefined);
          return [i, r.projectRef] as const;
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      t.diagnostic(`12,000 concurrent issuances (10,000 distinct, 4 replicas, 20 connections) in ${seconds.toFixed(2)} s`);
      const byProject = new Map<number, string>();
      for (const [i, ref] of results) {
        const prior = byProject.get(i);
        if (prior !== undefined) assert.equal(ref, prior, `project ${i} got two refs`);
        byProject.set(i, ref);
      }
      const codes = [...byProject.values()].map((ref) => Number(ref.slice(2))).sort((a, b) => a - b);
      assert.equal(new Set(codes).size, n, "no duplicate");
      assert.deepEqual([codes[0], codes[n - 1]], [1, n], "no gap: exactly 1..n");
      const counter = await db.query<{ last_code: string }>(
        `SELECT last_code FROM refs.ref_counters WHERE client_id='bulk' AND subject='agent' AND kind='project'`,
      );
      assert.equal(Number(counter.rows[0]?.last_code), n);
      assert.ok(seconds < 60, `took ${seconds.toFixed(1)} s`);

      // New incarnations get new codes above every earlier one; earlier codes keep their pins.
      await db.query(`UPDATE refs.projects SET retired_at = now() WHERE canonical_id IN (SELECT 'agent:bulk:p' || i FROM generate_series(1, 100) AS i)`);
      await db.query(
        `INSERT INTO refs.projects (canonical_id, incarnation, client_id, project_id, root_identity, name)
         SELECT 'agent:bulk:p' || i, 2, 'bulk', 'p' || i, '/srv/moved' || i, 'p' || i FROM generate_series(1, 100) AS i`,
      );
      // Listed in pages of 100, each continuation exactly as the previous page returned it.
      const relisted: Array<{ projectRef: string; project?: { canonicalId: string; incarnation: bigint } | undefined }> = [];
      let cursor = "";
      do {
        const page = await (replicas[1] as RefClient).listProjects({ limit: 100, cursor }, as(who));
        assert.equal(page.failure, undefined);
        relisted.push(...page.projects);
        assert.equal(page.omitted, n - relisted.length, "omitted counts exactly the Projects not listed yet");
        cursor = page.nextCursor;
      } while (cursor !== "");
      assert.equal(new Set(relisted.map((e) => e.project?.canonicalId)).size, n, "every live Project once");
      const newCodes = relisted
        .filter((e) => e.project?.incarnation === 2n)
        .map((e) => Number(e.projectRef.slice(2)))
        .sort((a, b) => a - b);
      assert.deepEqual(
        newCodes,
        Array.from({ length: 100 }, (_, i) => n + 1 + i),
      );
      const old = await (replicas[2] as RefClient).resolveProject({ selector: byProject.get(1) ?? "" }, as(who));
      assert.equal(old.failure?.reasonCode, "stale_ref");
      const total = await db.query<{ c: string; d: string }>(
        `SELECT count(*) AS c, count(DISTINCT code) AS d FROM refs.project_refs WHERE client_id='bulk' AND subject='agent'`,
      );
      assert.deepEqual([Number(total.rows[0]?.c), Number(total.rows[0]?.d)], [n + 100, n + 100]);
    } finally {
      await Promise.all(pools.map((p) => p.close()));
      await database.drop();
    }
  });

  it("the schema makes recycling impossible: refs are immutable, counters only advance, pinned identities are never deleted", async () => {
    const { client, db } = env;
    const grace: Principal = { clientId: "acme", subject: "grace" };
    await register(client, "guarded", "/srv/guarded");
    const ref = (await refsOf(client, grace))["agent:acme:guarded"] ?? "";
    const code = ref.slice(2);
    const session = await client.createSession({ projectSelector: ref }, as(grace));
    await client.rotateAgentEndpoint({ agentId: "a", endpointId: "e", expectedControllerGeneration: 0n }, as(grace));
    const agent = await agentTool(client, grace, "create_agent", { name: "g" });
    const task = await agentTool(client, grace, "create_agent_task", {
      project: ref,
      title: "t",
      instructions: "",
      assignee_agent_id: agent["agent_id"],
      idempotency_key: "k",
    });
    await agentTool(client, grace, "start_agent_task_attempt", { task_id: task["task_id"], assignee_agent_id: agent["agent_id"], idempotency_key: "k" });

    const refused = async (sql: string, params: unknown[] = []) => {
      await assert.rejects(db.query(sql, params), (e: unknown) => e instanceof Error, sql);
    };
    const who = `client_id='acme' AND subject='grace'`;
    await refused(`UPDATE refs.project_refs SET incarnation = incarnation + 1 WHERE ${who} AND code = $1`, [code]);
    await refused(`DELETE FROM refs.project_refs WHERE ${who}`);
    await refused(`TRUNCATE refs.project_refs CASCADE`);
    await refused(`INSERT INTO refs.project_refs (client_id, subject, code, canonical_id, incarnation) VALUES ('acme', 'grace', $1, 'agent:acme:secret', 1)`, [
      code,
    ]);
    await refused(`UPDATE refs.ref_counters SET last_code = 0 WHERE ${who}`);
    await refused(`DELETE FROM refs.ref_counters WHERE ${who}`);
    await refused(`UPDATE refs.ref_counters SET kind = 'session' WHERE ${who} AND kind = 'project'`);
    await refused(`INSERT INTO refs.ref_counters (client_id, subject, kind, last_code) VALUES ('x', 'y', 'goal', 1)`);
    await refused(`DELETE FROM refs.projects WHERE canonical_id = 'agent:acme:guarded'`);
    await refused(`UPDATE refs.projects SET root_identity = '/elsewhere' WHERE canonical_id = 'agent:acme:guarded'`);
    await refused(`UPDATE refs.session_refs SET session_id = session_id WHERE ${who}`);
    await refused(`DELETE FROM refs.sessions WHERE session_id = $1`, [session.session?.sessionId]);
    await refused(`UPDATE refs.sessions SET project_canonical_id = 'agent:acme:secret' WHERE session_id = $1`, [session.session?.sessionId]);
    await refused(`UPDATE refs.agent_continuation_refs SET controller_generation = 2 WHERE ${who}`);
    await refused(`UPDATE refs.agent_endpoints SET controller_generation = 1 WHERE ${who}`);
    await refused(`UPDATE refs.attempt_refs SET controller_generation = 2 WHERE ${who}`);
    await refused(`UPDATE refs.agent_tasks SET current_fence = 0 WHERE task_id = $1`, [task["task_id"]]);
    await refused(`UPDATE refs.agent_task_attempts SET attempt_fence = 9 WHERE ${who}`);
    await refused(`UPDATE refs.agent_events SET kind = 'task_stopped' WHERE agent_id = $1`, [agent["agent_id"]]);
    await refused(`DELETE FROM refs.agent_replays WHERE ${who}`);
    // A session ref can only name a session of the same owner (composite FK).
    await refused(`INSERT INTO refs.session_refs (client_id, subject, code, session_id) VALUES ('evil', 'mallory', 99, $1)`, [session.session?.sessionId]);
    // Retirement is final: un-retiring would resurrect stale refs.
    await client.retireProject({ clientId: "acme", projectId: "guarded" }, as(runner));
    await refused(`UPDATE refs.projects SET retired_at = NULL WHERE canonical_id = 'agent:acme:guarded'`);
    assert.equal((await client.resolveProject({ selector: ref }, as(grace))).failure?.reasonCode, "stale_ref");
  });

  it("selectors are exact: malformed refs fail as invalid, not as a lookup", async () => {
    const { client } = env;
    for (const selector of ["p1", "~p01", "~p1 ", "acme:x", "", "~s1"]) {
      const r = await client.resolveProject({ selector }, as(alice));
      assert.equal(r.failure?.reasonCode, "invalid_value", selector);
      assert.equal(r.failure?.detailCode, "invalid_project_selector");
    }
  });
});
