/**
 * Projects and project_refs in Postgres. A ref is a selector scoped to one principal and
 * pinned to one exact incarnation: resolution looks up the pin, then re-runs the ordinary
 * visibility check; a retired, re-rooted or hidden Project makes the old ref fail closed.
 *
 * Resolution costs at most one round trip: a cold ref resolution reads the pin, the live
 * incarnation and the caller's visibility in one query. Pins never change and are cached
 * without expiry; live incarnations and visibility are cached for `liveCacheTtlMs`.
 *
 * One concept over 400 lines: the Project store (Projects and their refs change in the same
 * transactions).
 */
import type { Database, Principal, Queryable } from "@webcodex/platform";
import { randomBytes } from "node:crypto";
import {
  canonicalProjectId,
  clampRule,
  cursorFailure,
  decodeCursor,
  encodeCursor,
  PipelineStage,
  isCanonicalIdPart,
  isCanonicalProjectId,
  listProjectsFollowUp,
  ReasonCode,
  toolFailure,
} from "@webcodex/contracts";
import type { Result } from "@webcodex/contracts";
import { createBoundedCache } from "../refs/bounded-cache.js";
import { createCoalescer } from "../refs/coalescer.js";
import { formatRef, parseRef, RefKind } from "../refs/ref-codes.js";

export interface ProjectRecord {
  canonicalId: string;
  incarnation: number;
  clientId: string;
  projectId: string;
  rootIdentity: string;
  name: string;
  /** The subject that created it; "" for a Project a Runner registered itself. */
  ownerSubject: string;
  visibility: ProjectVisibility;
}

export type ProjectVisibility = "private" | "tenant";
export const isProjectVisibility = (v: unknown): v is ProjectVisibility => v === "private" || v === "tenant";

/** The canonical id of a Project address; throws when a part cannot be in one. */
export function validCanonicalProjectId(clientId: string, projectId: string): string {
  const id = canonicalProjectId(clientId, projectId);
  if (!isCanonicalIdPart(clientId) || !isCanonicalIdPart(projectId)) throw new Error(`invalid project address ${id}`);
  return id;
}

interface Row {
  canonical_id: string;
  incarnation: string | number;
  client_id: string;
  project_id: string;
  root_identity: string;
  name: string;
  owner_subject?: string | null;
  visibility?: string | null;
}
const toRecord = (r: Row): ProjectRecord => ({
  canonicalId: r.canonical_id,
  incarnation: Number(r.incarnation),
  clientId: r.client_id,
  projectId: r.project_id,
  rootIdentity: r.root_identity,
  name: r.name,
  ownerSubject: r.owner_subject ?? "",
  visibility: r.visibility === "private" ? "private" : "tenant",
});

export type Resolution = Result<{ project: ProjectRecord }>;

/** The single "not found" answer: identical for "does not exist" and "exists but not yours". */
const notFound = (): Resolution => ({
  ok: false,
  failure: toolFailure(ReasonCode.projectNotFound, PipelineStage.resolution, { message: "No such project for this caller; call list_projects." }),
});

/**
 * The caller's own ref no longer names a project it can use. `project_incarnation_changed`
 * only when the caller can see the successor anyway (list_projects shows it); otherwise
 * `project_unavailable`, which does not say whether the project was retired or hidden.
 */
const staleRef = (detail: "project_incarnation_changed" | "project_unavailable"): Resolution => ({
  ok: false,
  failure: toolFailure(ReasonCode.staleRef, PipelineStage.resolution, {
    detail_code: detail,
    message: "This project_ref no longer names a live project; call list_projects for current refs.",
    follow_up: listProjectsFollowUp(),
  }),
});

export interface ProjectStoreOptions {
  /**
   * How long a live-Project lookup (and a subject's visibility) may be served from memory.
   * Writes through this store invalidate at once; the TTL bounds staleness from writes made
   * by other replicas. Embedded mode (the only writer) can use Infinity; 0 disables it.
   */
  liveCacheTtlMs?: number;
  /** Pinned refs never change, so they are cached without expiry, up to this many (0 disables). */
  maxCachedPins?: number;
  /** A use record that could not be written (the call it belongs to is not affected). */
  onUseError?: (error: unknown) => void;
}

/** A list_projects page request (the gateway validated it; absent: the defaults). */
export interface ListQuery {
  /** Case-insensitive substring of the name ("" or absent: all). */
  name?: string;
  limit?: number;
  cursor?: string;
  /** Only these canonical ids (embedded mode: what a Runner here serves). */
  only?: readonly string[];
}

export type ListPage = Result<{ entries: Array<{ project: ProjectRecord; ref: string }>; omitted: number; nextCursor?: string }>;

const LIST_LIMIT = clampRule("list_projects", "limit");
/** How long a cut listing's continuation stays valid. */
export const SNAPSHOT_TTL_MS = 60 * 60 * 1000;

/** At most this many projects per issue_project_refs call. */
const ISSUE_BATCH = 1_000;

export function createProjectStore(db: Database, options: ProjectStoreOptions = {}) {
  const schema = "refs";
  const liveTtl = options.liveCacheTtlMs ?? 1_000;
  const maxPins = options.maxCachedPins ?? 100_000;
  const pins = createBoundedCache<{ canonicalId: string; incarnation: number }>({ maxEntries: maxPins });
  const issued = createBoundedCache<string>({ maxEntries: maxPins });
  const live = createBoundedCache<{ project: ProjectRecord | undefined }>({ maxEntries: maxPins, ttlMs: liveTtl });
  const hidden = createBoundedCache<boolean>({ maxEntries: maxPins, ttlMs: liveTtl });

  const principalKey = (p: Principal) => `${p.clientId}\u0000${p.subject}`;
  /** Per principal, the Project whose use this process recorded last (recordUse). */
  const lastUse = createBoundedCache<string>({ maxEntries: maxPins, ttlMs: 60_000 });
  const pendingUses = new Set<Promise<void>>();
  /** Microseconds since the epoch of the last recorded use: strictly rising in this process. */
  let useClock = 0;
  /** The live Projects `$1`/`$2` (client id, subject) sees; callers append conditions. */
  const visibleSelect = `SELECT p.*, s.owner_subject, s.visibility FROM ${schema}.projects p
         LEFT JOIN ${schema}.project_settings s ON s.canonical_id = p.canonical_id
         WHERE p.client_id=$1 AND p.retired_at IS NULL
           AND (s.visibility IS NULL OR s.visibility = 'tenant' OR s.owner_subject = $2)
           AND NOT EXISTS (SELECT 1 FROM ${schema}.hidden_projects h WHERE h.canonical_id=p.canonical_id AND h.client_id=$1 AND h.subject=$2)`;
  const hiddenKey = (canonicalId: string, clientId: string, subject: string) => `${canonicalId}\u0000${clientId}\u0000${subject}`;

  /**
   * Ordinary visibility: a principal sees the live Projects of its own tenant that are shared
   * with the tenant or that it owns, unless hidden from its subject.
   */
  const visible = (principal: Principal, project: ProjectRecord | undefined, isHidden: boolean): project is ProjectRecord =>
    project !== undefined &&
    project.clientId === principal.clientId &&
    !isHidden &&
    (project.visibility === "tenant" || project.ownerSubject === principal.subject);

  interface LiveRow {
    live_incarnation: string | number | null;
    live_client_id: string | null;
    live_project_id: string | null;
    live_root_identity: string | null;
    live_name: string | null;
    hidden: boolean;
    owner_subject: string | null;
    visibility: string | null;
  }

  /** Caches what one resolution read: the live incarnation of `canonicalId` (or none) and the caller's visibility. */
  function rememberLive(canonicalId: string, row: LiveRow | undefined, principal: Principal): ProjectRecord | undefined {
    const project =
      row && row.live_incarnation !== null
        ? {
            canonicalId,
            incarnation: Number(row.live_incarnation),
            clientId: row.live_client_id ?? "",
            projectId: row.live_project_id ?? "",
            rootIdentity: row.live_root_identity ?? "",
            name: row.live_name ?? "",
            ownerSubject: row.owner_subject ?? "",
            visibility: row.visibility === "private" ? ("private" as const) : ("tenant" as const),
          }
        : undefined;
    live.set(canonicalId, { project });
    if (project) hidden.set(hiddenKey(canonicalId, principal.clientId, principal.subject), row?.hidden === true);
    return project;
  }

  /** The live incarnation of `canonicalId` when `principal` may see it, from cache or one query. */
  async function visibleLive(principal: Principal, canonicalId: string): Promise<ProjectRecord | undefined> {
    const cached = live.get(canonicalId);
    if (cached && cached.project === undefined) return undefined;
    const cachedHidden = hidden.get(hiddenKey(canonicalId, principal.clientId, principal.subject));
    if (cached && cachedHidden !== undefined) return visible(principal, cached.project, cachedHidden) ? cached.project : undefined;
    const r = await db.query<LiveRow>(`SELECT * FROM ${schema}.resolve_live_project($1, $2, $3)`, [canonicalId, principal.clientId, principal.subject]);
    const row = r.rows[0];
    const project = rememberLive(canonicalId, row, principal);
    return visible(principal, project, row?.hidden === true) ? project : undefined;
  }

  function judgePin(pin: { canonicalId: string; incarnation: number }, current: ProjectRecord | undefined): Resolution {
    if (!current) return staleRef("project_unavailable");
    if (current.incarnation !== pin.incarnation) return staleRef("project_incarnation_changed");
    return { ok: true, project: current };
  }

  async function resolveRef(principal: Principal, code: string): Promise<Resolution> {
    const key = `${principalKey(principal)}\u0000${code}`;
    const pin = pins.get(key);
    if (pin) return judgePin(pin, await visibleLive(principal, pin.canonicalId));
    // Cold: the pin, the live incarnation and the caller's visibility in one round trip.
    const r = await db.query<{ pin_canonical_id: string; pin_incarnation: string | number } & LiveRow>(
      `SELECT * FROM ${schema}.resolve_project_ref($1, $2, $3)`,
      [principal.clientId, principal.subject, code],
    );
    const row = r.rows[0];
    if (!row) return notFound();
    const pinned = { canonicalId: row.pin_canonical_id, incarnation: Number(row.pin_incarnation) };
    pins.set(key, pinned);
    const project = rememberLive(pinned.canonicalId, row, principal);
    return judgePin(pinned, visible(principal, project, row.hidden) ? project : undefined);
  }

  /** One call of issue_project_refs per chunk; returns "canonical\0incarnation" → ref. */
  async function issueBatch(principal: Principal, targets: ProjectRecord[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const unique = [...new Map(targets.map((p) => [`${p.canonicalId}\u0000${p.incarnation}`, p])).values()];
    for (let i = 0; i < unique.length; i += ISSUE_BATCH) {
      const chunk = unique.slice(i, i + ISSUE_BATCH);
      const r = await db.query<{ out_canonical_id: string; out_incarnation: string; out_code: string }>(
        `SELECT out_canonical_id, out_incarnation, out_code FROM ${schema}.issue_project_refs($1, $2, $3::text[], $4::bigint[])`,
        [principal.clientId, principal.subject, chunk.map((p) => p.canonicalId), chunk.map((p) => p.incarnation)],
      );
      for (const row of r.rows) out.set(`${row.out_canonical_id}\u0000${Number(row.out_incarnation)}`, formatRef(RefKind.project, String(row.out_code)));
    }
    return out;
  }

  // Concurrent issuances for one principal share one transaction (see coalescer.ts).
  const issuer = createCoalescer<{ principal: Principal; project: ProjectRecord }, Map<string, string>>(
    async (_key, items) => {
      const first = items[0];
      return first
        ? issueBatch(
            first.principal,
            items.map((i) => i.project),
          )
        : new Map();
    },
    { maxBatch: ISSUE_BATCH },
  );

  /** project_refs for `projects` (live incarnations the caller sees), issued on first sight. */
  async function issueRefs(principal: Principal, projects: readonly ProjectRecord[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const keyOf = (p: { canonicalId: string; incarnation: number }) => `${principalKey(principal)}\u0000${p.canonicalId}\u0000${p.incarnation}`;
    const missing = projects.filter((p) => {
      const hit = issued.get(keyOf(p));
      if (hit) out.set(p.canonicalId, hit);
      return !hit;
    });
    if (missing.length === 0) return out;
    // Large lists go straight to the database in chunks; single issuances coalesce.
    const fresh =
      missing.length >= ISSUE_BATCH
        ? await issueBatch(principal, missing)
        : await issuer.submit(
            principalKey(principal),
            missing.map((project) => ({ principal, project })),
          );
    for (const p of missing) {
      const ref = fresh.get(`${p.canonicalId}\u0000${p.incarnation}`);
      if (!ref) throw new Error("project_ref issuance returned no ref");
      issued.set(keyOf(p), ref);
      out.set(p.canonicalId, ref);
    }
    return out;
  }

  /**
   * Resolves the Project a change or delete names: as `resolve` does, and for a tenant admin
   * also a private Project of its tenant named by canonical id (admins may change or delete
   * any of the tenant's Projects; they do not see or use them otherwise).
   */
  async function resolveForManagement(principal: Principal, selector: string): Promise<Resolution> {
    const resolution = await resolve(principal, selector);
    if (resolution.ok || !principal.tenantAdmin || !isCanonicalProjectId(selector)) return resolution;
    const r = await db.query<LiveRow>(`SELECT * FROM ${schema}.resolve_live_project($1, $2, $3)`, [selector, principal.clientId, principal.subject]);
    const candidate = rememberLive(selector, r.rows[0], principal);
    return candidate && candidate.clientId === principal.clientId ? { ok: true, project: candidate } : resolution;
  }

  async function resolve(principal: Principal, selector: string): Promise<Resolution> {
    const code = parseRef(RefKind.project, selector);
    if (code !== undefined) return resolveRef(principal, code);
    if (!isCanonicalProjectId(selector)) {
      return {
        ok: false,
        failure: toolFailure(ReasonCode.invalidValue, PipelineStage.resolution, {
          detail_code: "invalid_project_selector",
          message: "project must be a project_ref like ~p1 or agent:<client_id>:<project_id>.",
        }),
      };
    }
    const current = await visibleLive(principal, selector);
    return current ? { ok: true, project: current } : notFound();
  }

  /** The live incarnation of a caller-owned address, for the tenant-scoped management calls. */
  function ownedAddress(principal: Principal, clientId: string, projectId: string): string {
    if (clientId !== principal.clientId) throw new ProjectOwnershipError();
    return validCanonicalProjectId(clientId, projectId);
  }

  return {
    /**
     * Registers a Project root at `agent:<client_id>:<project_id>`. The same root re-confirms
     * the live incarnation; a different root (or none live) opens the next incarnation, so
     * every earlier ref to the address goes stale.
     */
    async register(input: {
      clientId: string;
      projectId: string;
      rootIdentity: string;
      name: string;
    }): Promise<{ project: ProjectRecord; newIncarnation: boolean }> {
      const canonicalId = validCanonicalProjectId(input.clientId, input.projectId);
      const outcome = await db.transaction(async (tx) => {
        await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [canonicalId]);
        // A Project no one declared (a Runner registered it itself) is shared with its tenant.
        await tx.query(
          `INSERT INTO ${schema}.project_settings (canonical_id, client_id, owner_subject, visibility) VALUES ($1,$2,NULL,'tenant') ON CONFLICT (canonical_id) DO NOTHING`,
          [canonicalId, input.clientId],
        );
        const settings = (
          await tx.query<{ owner_subject: string | null; visibility: string }>(
            `SELECT owner_subject, visibility FROM ${schema}.project_settings WHERE canonical_id=$1`,
            [canonicalId],
          )
        ).rows[0];
        const owned = {
          ownerSubject: settings?.owner_subject ?? "",
          visibility: settings?.visibility === "private" ? ("private" as const) : ("tenant" as const),
        };
        const liveRow = await tx.query<Row>(`SELECT * FROM ${schema}.projects WHERE canonical_id=$1 AND retired_at IS NULL`, [canonicalId]);
        const current = liveRow.rows[0] ? { ...toRecord(liveRow.rows[0]), ...owned } : undefined;
        if (current && current.rootIdentity === input.rootIdentity) {
          if (current.name !== input.name)
            await tx.query(`UPDATE ${schema}.projects SET name=$3 WHERE canonical_id=$1 AND incarnation=$2`, [canonicalId, current.incarnation, input.name]);
          return { project: { ...current, name: input.name }, newIncarnation: false };
        }
        if (current)
          await tx.query(`UPDATE ${schema}.projects SET retired_at=now() WHERE canonical_id=$1 AND incarnation=$2`, [canonicalId, current.incarnation]);
        const max = await tx.query<{ m: string | null }>(`SELECT max(incarnation) AS m FROM ${schema}.projects WHERE canonical_id=$1`, [canonicalId]);
        const incarnation = Number(max.rows[0]?.m ?? 0) + 1;
        await tx.query(`INSERT INTO ${schema}.projects (canonical_id, incarnation, client_id, project_id, root_identity, name) VALUES ($1,$2,$3,$4,$5,$6)`, [
          canonicalId,
          incarnation,
          input.clientId,
          input.projectId,
          input.rootIdentity,
          input.name,
        ]);
        return {
          project: {
            canonicalId,
            incarnation,
            clientId: input.clientId,
            projectId: input.projectId,
            rootIdentity: input.rootIdentity,
            name: input.name,
            ...owned,
          },
          newIncarnation: true,
        };
      });
      // Invalidate after commit so no reader can re-cache the retired incarnation.
      live.delete(canonicalId);
      return outcome;
    },

    /**
     * The Project disappears: its live incarnation is retired (final), so every ref to it
     * fails closed and a later registration opens a new incarnation. The caller's client id
     * must own the address (else ProjectOwnershipError).
     */
    async retire(principal: Principal, input: { clientId: string; projectId: string }): Promise<{ retired: boolean; project?: ProjectRecord }> {
      const canonicalId = ownedAddress(principal, input.clientId, input.projectId);
      const outcome = await db.transaction(async (tx) => {
        await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [canonicalId]);
        const r = await tx.query<Row>(`UPDATE ${schema}.projects SET retired_at=now() WHERE canonical_id=$1 AND retired_at IS NULL RETURNING *`, [canonicalId]);
        return r.rows[0] ? { retired: true, project: toRecord(r.rows[0]) } : { retired: false };
      });
      live.delete(canonicalId);
      return outcome;
    },

    /** Hides the Project from one subject of its client, or shows it again. */
    async setVisibility(
      principal: Principal,
      input: { clientId: string; projectId: string; subject: string; visible: boolean },
    ): Promise<{ changed: boolean }> {
      const canonicalId = ownedAddress(principal, input.clientId, input.projectId);
      if (!input.subject) throw new RangeError("subject is required");
      const r = input.visible
        ? await db.query(`DELETE FROM ${schema}.hidden_projects WHERE canonical_id=$1 AND client_id=$2 AND subject=$3`, [
            canonicalId,
            input.clientId,
            input.subject,
          ])
        : await db.query(`INSERT INTO ${schema}.hidden_projects (canonical_id, client_id, subject) VALUES ($1,$2,$3) ON CONFLICT DO NOTHING`, [
            canonicalId,
            input.clientId,
            input.subject,
          ]);
      hidden.delete(hiddenKey(canonicalId, input.clientId, input.subject));
      return { changed: r.rowCount > 0 };
    },

    /**
     * Records the owner and visibility of an address the caller's tenant is about to create.
     * Refused (project_exists) while a live incarnation holds the address, or while another
     * subject's declaration of it is recent (its Runner may still be starting).
     */
    async declare(principal: Principal, input: { projectId: string; visibility: ProjectVisibility }): Promise<Result> {
      if (!isCanonicalIdPart(input.projectId)) {
        return {
          ok: false,
          failure: toolFailure(ReasonCode.invalidValue, PipelineStage.normalization, {
            detail_code: "invalid_project_name",
            evidence: { field: "/name" },
            message: "name must match [A-Za-z0-9._-]{1,128}.",
          }),
        };
      }
      const canonicalId = validCanonicalProjectId(principal.clientId, input.projectId);
      const exists = () => ({
        ok: false as const,
        failure: toolFailure(ReasonCode.projectExists, PipelineStage.preflight, {
          message: "A project with this name exists in your tenant; choose another name.",
        }),
      });
      const outcome = await db.transaction(async (tx) => {
        await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [canonicalId]);
        const liveRow = await tx.query(`SELECT 1 FROM ${schema}.projects WHERE canonical_id=$1 AND retired_at IS NULL`, [canonicalId]);
        if (liveRow.rowCount > 0) return exists();
        const prior = (
          await tx.query<{ owner_subject: string | null; recent: boolean }>(
            `SELECT owner_subject, updated_at > now() - interval '15 minutes' AS recent FROM ${schema}.project_settings WHERE canonical_id=$1`,
            [canonicalId],
          )
        ).rows[0];
        if (prior && prior.recent && prior.owner_subject !== null && prior.owner_subject !== principal.subject) return exists();
        await tx.query(
          `INSERT INTO ${schema}.project_settings (canonical_id, client_id, owner_subject, visibility) VALUES ($1,$2,$3,$4)
           ON CONFLICT (canonical_id) DO UPDATE SET owner_subject=EXCLUDED.owner_subject, visibility=EXCLUDED.visibility, updated_at=now()`,
          [canonicalId, principal.clientId, principal.subject, input.visibility],
        );
        return { ok: true as const };
      });
      live.delete(canonicalId);
      return outcome;
    },

    /**
     * Changes a Project's visibility. Its owner may, and so may a tenant admin (who can name
     * a private Project by canonical id). Someone who sees the Project but owns it not gets
     * not_project_owner; anyone else learns nothing (project_not_found).
     */
    async update(
      principal: Principal,
      input: { selector: string; visibility: ProjectVisibility },
    ): Promise<Result<{ project: ProjectRecord; changed: boolean }>> {
      const managed = await resolveForManagement(principal, input.selector);
      if (!managed.ok) return managed;
      const project = managed.project;
      if (project.ownerSubject !== principal.subject && !principal.tenantAdmin) {
        return {
          ok: false,
          failure: toolFailure(ReasonCode.notProjectOwner, PipelineStage.authorization, {
            message: "Only the project's owner or a tenant admin may change it.",
          }),
        };
      }
      if (input.visibility === "private" && !project.ownerSubject) {
        return {
          ok: false,
          failure: toolFailure(ReasonCode.invalidValue, PipelineStage.preflight, {
            detail_code: "project_has_no_owner",
            evidence: { field: "/visibility" },
            message: "This project was registered by its Runner and has no owner; it stays shared with the tenant.",
          }),
        };
      }
      if (project.visibility === input.visibility) return { ok: true, project, changed: false };
      await db.query(`UPDATE ${schema}.project_settings SET visibility=$2, updated_at=now() WHERE canonical_id=$1`, [project.canonicalId, input.visibility]);
      live.delete(project.canonicalId);
      return { ok: true, project: { ...project, visibility: input.visibility }, changed: true };
    },

    /**
     * One page of the live Projects visible to `principal`, most recently used by it first
     * (never used: by canonical id), each with its project_ref (issued for this page only).
     * A cut first page snapshots the order of the rest, and its cursor walks that snapshot, so
     * a continuation neither skips nor repeats a Project when use order changes meanwhile;
     * Projects that stopped being visible are left out (and not counted) when a page is read.
     */
    async list(principal: Principal, query: ListQuery = {}): Promise<ListPage> {
      if (pendingUses.size > 0) await Promise.allSettled([...pendingUses]);
      const limit = Math.max(1, Math.min(query.limit ?? LIST_LIMIT.default, LIST_LIMIT.ceiling));
      let name = query.name ?? "";
      const restart = name !== "" ? { name } : {};
      const only = query.only ? new Set(query.only) : undefined;
      let ordered: ProjectRecord[];
      let snapshot: { id: string; ids: string[]; offset: number } | undefined;
      if (query.cursor !== undefined) {
        const payload = decodeCursor("projects", query.cursor);
        if (
          !Array.isArray(payload) ||
          typeof payload[0] !== "string" ||
          !Number.isSafeInteger(payload[1]) ||
          (payload[1] as number) < 0 ||
          typeof payload[2] !== "string"
        )
          return { ok: false, failure: cursorFailure("cursor_invalid", "list_projects", restart) };
        // The cursor names its listing's filter: a restart keeps it, another filter is not its listing.
        const own = payload[2];
        if (query.name !== undefined && own !== name)
          return { ok: false, failure: cursorFailure("cursor_invalid", "list_projects", own !== "" ? { name: own } : {}) };
        const r = await db.query<{ name_filter: string; canonical_ids: string[] }>(
          `SELECT name_filter, canonical_ids FROM ${schema}.project_list_snapshots
            WHERE snapshot_id=$1 AND client_id=$2 AND subject=$3 AND created_at > now() - make_interval(secs => $4)`,
          [payload[0], principal.clientId, principal.subject, SNAPSHOT_TTL_MS / 1000],
        );
        const row = r.rows[0];
        // Unknown, another principal's and expired snapshots look the same.
        if (!row || row.name_filter !== own) return { ok: false, failure: cursorFailure("cursor_expired", "list_projects", own !== "" ? { name: own } : {}) };
        name = own;
        snapshot = { id: payload[0], ids: row.canonical_ids, offset: payload[1] as number };
        const rest = snapshot.ids.slice(snapshot.offset);
        const live = await db.query<Row>(`${visibleSelect} AND p.canonical_id = ANY($3::text[])`, [principal.clientId, principal.subject, rest]);
        const byId = new Map(live.rows.map((row) => [row.canonical_id, toRecord(row)]));
        ordered = rest.flatMap((id) => {
          const p = byId.get(id);
          return p ? [p] : [];
        });
      } else {
        const params: unknown[] = [principal.clientId, principal.subject];
        let filter = "";
        if (name !== "") {
          params.push(name.toLowerCase());
          filter = ` AND strpos(lower(p.name), $${params.length}) > 0`;
        }
        const r = await db.query<Row>(
          `${visibleSelect}${filter} ORDER BY (SELECT u.used_at FROM ${schema}.project_use u
              WHERE u.client_id=$1 AND u.subject=$2 AND u.canonical_id=p.canonical_id) DESC NULLS LAST, p.canonical_id`,
          params,
        );
        ordered = r.rows.map(toRecord);
      }
      if (only) ordered = ordered.filter((p) => only.has(p.canonicalId));
      const page = ordered.slice(0, limit);
      const omitted = ordered.length - page.length;
      let nextCursor: string | undefined;
      if (omitted > 0) {
        const lastId = (page[page.length - 1] as ProjectRecord).canonicalId;
        if (snapshot) {
          nextCursor = encodeCursor("projects", [snapshot.id, snapshot.ids.indexOf(lastId, snapshot.offset) + 1, name]);
        } else {
          const id = randomBytes(12).toString("base64url");
          await db.query(`DELETE FROM ${schema}.project_list_snapshots WHERE created_at < now() - make_interval(secs => $1)`, [SNAPSHOT_TTL_MS / 1000]);
          await db.query(`INSERT INTO ${schema}.project_list_snapshots (snapshot_id, client_id, subject, name_filter, canonical_ids) VALUES ($1,$2,$3,$4,$5)`, [
            id,
            principal.clientId,
            principal.subject,
            name,
            ordered.slice(limit).map((p) => p.canonicalId),
          ]);
          nextCursor = encodeCursor("projects", [id, 0, name]);
        }
      }
      const refs = await issueRefs(principal, page);
      const entries = page.flatMap((project) => {
        const ref = refs.get(project.canonicalId);
        return ref ? [{ project, ref }] : [];
      });
      return { ok: true, entries, omitted, ...(nextCursor !== undefined ? { nextCursor } : {}) };
    },

    /**
     * Records that `principal` used the Project in a tool call (list_projects orders by it).
     * Not awaited by the call: a listing by this process waits for the writes in flight. A use
     * of the Project this process last recorded for the principal, within a minute of that,
     * writes nothing (it is already first, unless another replica recorded a use meanwhile).
     */
    recordUse(principal: Principal, canonicalId: string): void {
      const key = principalKey(principal);
      if (lastUse.get(key) === canonicalId) return;
      lastUse.set(key, canonicalId);
      useClock = Math.max(useClock + 1, Date.now() * 1000);
      const write: Promise<void> = db
        .query(
          `INSERT INTO ${schema}.project_use (client_id, subject, canonical_id, used_at) VALUES ($1, $2, $3, 'epoch'::timestamptz + $4::bigint * interval '1 microsecond')
           ON CONFLICT (client_id, subject, canonical_id) DO UPDATE SET used_at = GREATEST(${schema}.project_use.used_at, EXCLUDED.used_at)`,
          [principal.clientId, principal.subject, canonicalId, useClock],
        )
        .then(
          () => undefined,
          (error: unknown) => {
            lastUse.delete(key);
            options.onUseError?.(error);
          },
        )
        .finally(() => pendingUses.delete(write));
      pendingUses.add(write);
    },

    /** Resolves a ref or canonical id for `principal`, re-running visibility every time. */
    resolve,
    resolveForManagement,

    /** Resolves `selector`, then returns the project_ref of the current incarnation (issued on first sight). */
    async issueRef(principal: Principal, selector: string): Promise<Result<{ project: ProjectRecord; ref: string }>> {
      const resolution = await resolve(principal, selector);
      if (!resolution.ok) return resolution;
      const refs = await issueRefs(principal, [resolution.project]);
      const ref = refs.get(resolution.project.canonicalId);
      if (!ref) throw new Error("project_ref issuance returned no ref");
      return { ok: true, project: resolution.project, ref };
    },

    /**
     * Whether the exact incarnation a Session (or other record) is pinned to is still the
     * live one and visible to `principal`: the ordinary Project check, re-run for a pin.
     */
    async pinnedVisible(principal: Principal, canonicalId: string, incarnation: number): Promise<ProjectRecord | undefined> {
      const current = await visibleLive(principal, canonicalId);
      return current && current.incarnation === incarnation ? current : undefined;
    },
  };
}

/** A management call named a Project of another client id. */
export class ProjectOwnershipError extends Error {
  constructor() {
    super("the caller's client id does not own this project");
    this.name = "ProjectOwnershipError";
  }
}

export type ProjectStore = ReturnType<typeof createProjectStore>;

/** One Project incarnation as an operator sees it (`webcodex projects list`). */
export interface StoredProject {
  canonical_id: string;
  incarnation: number;
  name: string;
  created_at: string;
  /** Absent while the incarnation is live. */
  retired_at?: string;
}

/**
 * Every Project the store holds, for operators: the live incarnations (and with
 * `includeRetired` the retired ones too), whatever a caller may see or a Runner may serve.
 * The model's list_projects is narrower (visibility, and in embedded mode only what this
 * process can serve); this is the listing that still shows the rest.
 */
export async function listStoredProjects(db: Queryable, options: { includeRetired?: boolean } = {}): Promise<StoredProject[]> {
  const { rows } = await db.query<{
    canonical_id: string;
    incarnation: string | number;
    name: string;
    created_at: Date | string;
    retired_at: Date | string | null;
  }>(
    `SELECT canonical_id, incarnation, name, created_at, retired_at FROM refs.projects
       ${options.includeRetired === true ? "" : "WHERE retired_at IS NULL"} ORDER BY canonical_id, incarnation`,
  );
  const iso = (v: Date | string) => new Date(v).toISOString();
  return rows.map((r) => ({
    canonical_id: r.canonical_id,
    incarnation: Number(r.incarnation),
    name: r.name,
    created_at: iso(r.created_at),
    ...(r.retired_at !== null ? { retired_at: iso(r.retired_at) } : {}),
  }));
}
