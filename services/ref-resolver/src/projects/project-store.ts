/**
 * Projects and project_refs in Postgres. A ref is a selector scoped to one principal and
 * pinned to one exact incarnation: resolution looks up the pin, then re-runs the ordinary
 * visibility check; a retired, re-rooted or invisible Project makes the old ref fail closed.
 */
import type { Database } from "@webcodex/platform";
import type { Principal } from "@webcodex/platform";
import { buildFollowUp, FailureStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";

export interface ProjectRecord {
  canonicalId: string;
  incarnation: number;
  clientId: string;
  projectId: string;
  rootIdentity: string;
  name: string;
}

const CANONICAL = /^agent:([A-Za-z0-9._-]{1,128}):([A-Za-z0-9._-]{1,128})$/;
const PROJECT_REF = /^~p([1-9][0-9]{0,15})$/;

export function canonicalProjectId(clientId: string, projectId: string): string {
  const id = `agent:${clientId}:${projectId}`;
  if (!CANONICAL.test(id)) throw new Error(`invalid project address ${id}`);
  return id;
}

interface Row {
  canonical_id: string;
  incarnation: string | number;
  client_id: string;
  project_id: string;
  root_identity: string;
  name: string;
}
const toRecord = (r: Row): ProjectRecord => ({
  canonicalId: r.canonical_id,
  incarnation: Number(r.incarnation),
  clientId: r.client_id,
  projectId: r.project_id,
  rootIdentity: r.root_identity,
  name: r.name,
});

export type Resolution = { ok: true; project: ProjectRecord } | { ok: false; failure: ToolFailure };

/** The single "not found" answer: identical for "does not exist" and "exists but not yours". */
const notFound = (): Resolution => ({
  ok: false,
  failure: toolFailure(ReasonCode.projectNotFound, FailureStage.resolution, { message: "No such project for this caller; call list_projects." }),
});

export interface ProjectStoreOptions {
  /**
   * How long a live-Project lookup may be served from memory. Writes through this store
   * invalidate at once; the TTL bounds staleness from writes made by other replicas.
   * Embedded mode (the only writer) can use Infinity.
   */
  liveCacheTtlMs?: number;
  /** Pinned refs never change, so they are cached without expiry, up to this many. */
  maxCachedPins?: number;
}

export function createProjectStore(db: Database, options: ProjectStoreOptions = {}) {
  const schema = "refs";
  const liveTtl = options.liveCacheTtlMs ?? 1_000;
  const maxPins = options.maxCachedPins ?? 100_000;
  const pins = new Map<string, { canonicalId: string; incarnation: number }>();
  const live = new Map<string, { at: number; project: ProjectRecord | undefined }>();

  const issued = new Map<string, string>();
  async function issueProjectRef(principal: Principal, project: ProjectRecord): Promise<string> {
    const key = `${principal.clientId}\u0000${principal.subject}\u0000${project.canonicalId}\u0000${project.incarnation}`;
    const hit = issued.get(key);
    if (hit) return hit;
    const ref = await issueProjectRefUncached(principal, project);
    if (issued.size >= maxPins) issued.delete(issued.keys().next().value as string);
    issued.set(key, ref);
    return ref;
  }

  async function issueProjectRefUncached(principal: Principal, project: ProjectRecord): Promise<string> {
    return db.transaction(async (tx) => {
      const existing = await tx.query<{ code: string }>(
        `SELECT code FROM ${schema}.project_refs WHERE client_id=$1 AND subject=$2 AND canonical_id=$3 AND incarnation=$4`,
        [principal.clientId, principal.subject, project.canonicalId, project.incarnation],
      );
      if (existing.rows[0]) return `~p${existing.rows[0].code}`;
      const counter = await tx.query<{ last_code: string }>(
        `INSERT INTO ${schema}.ref_counters (client_id, subject, kind, last_code) VALUES ($1,$2,'project',1)
         ON CONFLICT (client_id, subject, kind) DO UPDATE SET last_code = ${schema}.ref_counters.last_code + 1
         RETURNING last_code`,
        [principal.clientId, principal.subject],
      );
      const code = Number(counter.rows[0]?.last_code);
      const inserted = await tx.query<{ code: string }>(
        `INSERT INTO ${schema}.project_refs (client_id, subject, code, canonical_id, incarnation) VALUES ($1,$2,$3,$4,$5)
         ON CONFLICT (client_id, subject, canonical_id, incarnation) DO NOTHING RETURNING code`,
        [principal.clientId, principal.subject, code, project.canonicalId, project.incarnation],
      );
      if (inserted.rows[0]) return `~p${code}`;
      // A concurrent issuer won; the counter value is burned (never reused) and theirs stands.
      const winner = await tx.query<{ code: string }>(
        `SELECT code FROM ${schema}.project_refs WHERE client_id=$1 AND subject=$2 AND canonical_id=$3 AND incarnation=$4`,
        [principal.clientId, principal.subject, project.canonicalId, project.incarnation],
      );
      return `~p${winner.rows[0]?.code}`;
    });
  }

  async function liveProject(canonicalId: string): Promise<ProjectRecord | undefined> {
    const hit = live.get(canonicalId);
    if (hit && Date.now() - hit.at < liveTtl) return hit.project;
    const r = await db.query<Row>(`SELECT * FROM ${schema}.projects WHERE canonical_id=$1 AND retired_at IS NULL`, [canonicalId]);
    const project = r.rows[0] ? toRecord(r.rows[0]) : undefined;
    live.set(canonicalId, { at: Date.now(), project });
    return project;
  }

  async function pinnedRef(principal: Principal, code: number): Promise<{ canonicalId: string; incarnation: number } | undefined> {
    const key = `${principal.clientId}\u0000${principal.subject}\u0000${code}`;
    const hit = pins.get(key);
    if (hit) return hit;
    const pin = await db.query<{ canonical_id: string; incarnation: string }>(
      `SELECT canonical_id, incarnation FROM ${schema}.project_refs WHERE client_id=$1 AND subject=$2 AND code=$3`,
      [principal.clientId, principal.subject, code],
    );
    const row = pin.rows[0];
    if (!row) return undefined;
    const value = { canonicalId: row.canonical_id, incarnation: Number(row.incarnation) };
    if (pins.size >= maxPins) pins.delete(pins.keys().next().value as string);
    pins.set(key, value);
    return value;
  }

  /** Ordinary visibility: a principal sees the live Projects of its own client id. */
  const visible = (principal: Principal, project: ProjectRecord) => project.clientId === principal.clientId;

  return {
    /**
     * Registers a Project root at `agent:<client_id>:<project_id>`. The same root re-confirms
     * the live incarnation; a different root retires it and opens the next incarnation, so
     * every earlier ref to the address goes stale.
     */
    async register(input: { clientId: string; projectId: string; rootIdentity: string; name: string }): Promise<{ project: ProjectRecord; newIncarnation: boolean }> {
      const canonicalId = canonicalProjectId(input.clientId, input.projectId);
      const outcome = await db.transaction(async (tx) => {
        await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [canonicalId]);
        const live = await tx.query<Row>(`SELECT * FROM ${schema}.projects WHERE canonical_id=$1 AND retired_at IS NULL`, [canonicalId]);
        const current = live.rows[0] ? toRecord(live.rows[0]) : undefined;
        if (current && current.rootIdentity === input.rootIdentity) {
          if (current.name !== input.name) await tx.query(`UPDATE ${schema}.projects SET name=$3 WHERE canonical_id=$1 AND incarnation=$2`, [canonicalId, current.incarnation, input.name]);
          return { project: { ...current, name: input.name }, newIncarnation: false };
        }
        if (current) await tx.query(`UPDATE ${schema}.projects SET retired_at=now() WHERE canonical_id=$1 AND incarnation=$2`, [canonicalId, current.incarnation]);
        const max = await tx.query<{ m: string | null }>(`SELECT max(incarnation) AS m FROM ${schema}.projects WHERE canonical_id=$1`, [canonicalId]);
        const incarnation = Number(max.rows[0]?.m ?? 0) + 1;
        await tx.query(
          `INSERT INTO ${schema}.projects (canonical_id, incarnation, client_id, project_id, root_identity, name) VALUES ($1,$2,$3,$4,$5,$6)`,
          [canonicalId, incarnation, input.clientId, input.projectId, input.rootIdentity, input.name],
        );
        return { project: { canonicalId, incarnation, clientId: input.clientId, projectId: input.projectId, rootIdentity: input.rootIdentity, name: input.name }, newIncarnation: true };
      });
      // Invalidate after commit so no reader can re-cache the retired incarnation.
      live.delete(canonicalId);
      return outcome;
    },

    /** Live Projects visible to `principal`, each with its project_ref (issued on first sight). */
    async list(principal: Principal): Promise<Array<{ project: ProjectRecord; ref: string }>> {
      const r = await db.query<Row>(`SELECT * FROM ${schema}.projects WHERE client_id=$1 AND retired_at IS NULL ORDER BY canonical_id`, [principal.clientId]);
      const out: Array<{ project: ProjectRecord; ref: string }> = [];
      for (const row of r.rows) {
        const project = toRecord(row);
        out.push({ project, ref: await issueProjectRef(principal, project) });
      }
      return out;
    },

    /** Resolves a ref or canonical id for `principal`, re-running visibility every time. */
    async resolve(principal: Principal, selector: string): Promise<Resolution> {
      const refMatch = PROJECT_REF.exec(selector);
      if (refMatch) {
        const pinned = await pinnedRef(principal, Number(refMatch[1]));
        if (!pinned) return notFound();
        const current = await liveProject(pinned.canonicalId);
        if (!current || current.incarnation !== pinned.incarnation || !visible(principal, current)) {
          return {
            ok: false,
            failure: toolFailure(ReasonCode.staleRef, FailureStage.resolution, {
              detail_code: "project_incarnation_changed",
              message: "This project_ref no longer names a live project; call list_projects for current refs.",
              follow_up: buildFollowUp("fallback_recovery", "list_projects", {}),
            }),
          };
        }
        return { ok: true, project: current };
      }
      if (!CANONICAL.test(selector)) {
        return { ok: false, failure: toolFailure(ReasonCode.invalidValue, FailureStage.resolution, { detail_code: "invalid_project_selector", message: "project must be a project_ref like ~p1 or agent:<client_id>:<project_id>." }) };
      }
      const current = await liveProject(selector);
      if (!current || !visible(principal, current)) return notFound();
      return { ok: true, project: current };
    },
  };
}

export type ProjectStore = ReturnType<typeof createProjectStore>;
