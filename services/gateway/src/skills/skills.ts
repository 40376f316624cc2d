/**
 * list_skills and read_skill, composed in the gateway from two sources:
 *
 * - the project's own skills (`.agents/skills`, `.claude/skills`), read by the project's Runner
 *   like any file: the call goes through the ordinary Runner path (the Project resolved and
 *   authorized for this principal, then dispatched), so a project the caller cannot see fails
 *   exactly like a missing one;
 * - the tenant's skill catalog, a directory the operator configured per tenant
 *   (`<catalogs>/<tenant>/<skill>/SKILL.md`), read here and never writable by a model.
 *
 * A project skill shadows a tenant skill of the same name, and the catalog says so. The catalog
 * is name-sorted and paged within the catalog byte budget; a cut page says how many skills it
 * left out and gives the cursor that continues after its last name.
 */
import { realpath } from "node:fs/promises";
import { join } from "node:path";
import { PipelineStage, ReasonCode, toolFailure, toolLimit } from "@webcodex/contracts";
import type { ToolDefinition, ToolFailure, ToolInput } from "@webcodex/contracts";
import { listSkillResources, readSkillSlice, scanSkillRoot, skillRevision, sliceUtf8, SKILL_FILE_MAX_BYTES } from "@webcodex/platform/skills";
import type { SkillEntry } from "@webcodex/platform/skills";
import type { CallContext, Outcome } from "../call-context.js";

type Json = Record<string, unknown>;

/** A tenant id usable as one directory name; any other tenant has no catalog. */
const TENANT_DIR = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** A skill name usable as one directory name (list_skills names every readable one). */
const SKILL_DIR = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const CURSOR_PREFIX = "sc1.";

export interface SkillsDeps {
  /** The directory holding one skill catalog directory per tenant; absent: no tenant catalogs. */
  tenantCatalogsDir?: string | undefined;
  /** The ordinary Runner path (resolution, authorization, dispatch) for the project part. */
  runOnRunner: (def: ToolDefinition, args: Json, ctx: CallContext, callId: string) => Promise<Outcome>;
}

/** One catalog row as the model sees it. */
export interface SkillRow {
  name: string;
  description: string;
  source: "project" | "tenant";
  revision?: string;
  valid: boolean;
  problem?: string;
  shadows?: string[];
}

export function encodeSkillCursor(afterName: string): string {
  return CURSOR_PREFIX + Buffer.from(afterName, "utf8").toString("base64url");
}

export function decodeSkillCursor(cursor: string): string | undefined {
  if (!cursor.startsWith(CURSOR_PREFIX)) return undefined;
  const name = Buffer.from(cursor.slice(CURSOR_PREFIX.length), "base64url").toString("utf8");
  return name !== "" && encodeSkillCursor(name) === cursor ? name : undefined;
}

/** Project rows first in precedence: a tenant row whose name the project has is shadowed (the project row says so). */
export function mergeSkills(project: ReadonlyArray<SkillEntry & { shadows?: string[] }>, tenant: readonly SkillEntry[]): SkillRow[] {
  const rows = new Map<string, SkillRow>();
  const row = (e: SkillEntry, source: SkillRow["source"]): SkillRow => ({
    name: e.name,
    description: e.description,
    source,
    ...(e.revision !== "" ? { revision: e.revision } : {}),
    valid: e.valid,
    ...(e.problem !== undefined ? { problem: e.problem } : {}),
  });
  for (const e of project) rows.set(e.name, { ...row(e, "project"), ...(e.shadows ? { shadows: [...e.shadows] } : {}) });
  for (const e of tenant) {
    const winner = rows.get(e.name);
    if (winner) winner.shadows = [...(winner.shadows ?? []), "tenant"];
    else rows.set(e.name, row(e, "tenant"));
  }
  return [...rows.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * The page of `rows` (name-sorted) after `after`, within `budget` bytes of serialized rows (at
 * least one row, so a page always advances), with how many rows it left out.
 */
export function pageSkills(
  rows: readonly SkillRow[],
  after: string | undefined,
  budget: number,
): { skills: SkillRow[]; omitted?: number; next_cursor?: string } {
  const start = after === undefined ? 0 : rows.findIndex((r) => r.name > after);
  const rest = start < 0 ? [] : rows.slice(start);
  const page: SkillRow[] = [];
  let bytes = 2;
  for (const r of rest) {
    const size = Buffer.byteLength(JSON.stringify(r)) + (page.length > 0 ? 1 : 0);
    if (page.length > 0 && bytes + size > budget) break;
    page.push(r);
    bytes += size;
  }
  const omitted = rest.length - page.length;
  return omitted > 0 ? { skills: page, omitted, next_cursor: encodeSkillCursor((page[page.length - 1] as SkillRow).name) } : { skills: page };
}

/** A handler for each skill tool, taking that tool's arguments typed from its input schema. */
type SkillHandlers = {
  [N in "list_skills" | "read_skill"]: (def: ToolDefinition, args: ToolInput<N>, ctx: CallContext, callId: string) => Promise<Outcome>;
};
/** A handler called with a normalized call's arguments (validated against the tool's input schema). */
type WireHandler = (def: ToolDefinition, args: Json, ctx: CallContext, callId: string) => Promise<Outcome>;

export function createSkills(deps: SkillsDeps) {
  /** The caller's tenant catalog directory (real path), or undefined when there is none. */
  async function tenantDir(ctx: CallContext): Promise<string | undefined> {
    const tenant = ctx.caller.principal.clientId;
    if (deps.tenantCatalogsDir === undefined || !TENANT_DIR.test(tenant)) return undefined;
    return realpath(join(deps.tenantCatalogsDir, tenant)).catch(() => undefined);
  }

  async function listSkills(def: ToolDefinition, args: ToolInput<"list_skills">, ctx: CallContext, callId: string): Promise<Outcome> {
    let after: string | undefined;
    if (args.cursor !== undefined) {
      after = decodeSkillCursor(args.cursor);
      if (after === undefined) return invalid("cursor_invalid", "/cursor", "Pass next_cursor exactly as a list_skills page returned it.");
    }
    let project: SkillEntry[] = [];
    if (args.project !== undefined) {
      const out = await deps.runOnRunner(def, { project: args.project }, ctx, callId);
      if (!out.ok) return out;
      project = (out.result["skills"] ?? []) as SkillEntry[];
    }
    const dir = await tenantDir(ctx);
    const tenant = dir === undefined ? [] : await scanSkillRoot(dir, "");
    return { ok: true, result: pageSkills(mergeSkills(project, tenant), after, toolLimit("list_skills", "catalog_bytes")) };
  }

  async function readSkill(def: ToolDefinition, args: ToolInput<"read_skill">, ctx: CallContext, callId: string): Promise<Outcome> {
    const { skill, offset = 0, resource } = args;
    if (args.project !== undefined) {
      const out = await deps.runOnRunner(def, args, ctx, callId);
      // Only a skill the project does not have falls through to the tenant catalog.
      if (out.ok || out.failure.reason_code !== ReasonCode.skillNotFound || out.failure.detail_code !== "skill_not_found") return out;
    }
    const dir = await tenantDir(ctx);
    if (dir === undefined || !SKILL_DIR.test(skill)) return notFound(skill);
    const skillDir = join(dir, skill);
    const markdown = await readSkillSlice(skillDir, undefined, 0, SKILL_FILE_MAX_BYTES);
    if (!markdown.ok) return notFound(skill);
    const limit = toolLimit("read_skill", "body_bytes");
    const read = resource === undefined ? sliceUtf8(markdown.bytes, offset, limit) : await readSkillSlice(skillDir, resource, offset, limit);
    if (!read.ok) {
      if (read.refusal === "not_found")
        return {
          ok: false,
          failure: toolFailure(ReasonCode.skillNotFound, PipelineStage.resolution, { detail_code: "resource_not_found", evidence: { skill, resource } }),
        };
      if (read.refusal === "outside_skill")
        return {
          ok: false,
          failure: toolFailure(ReasonCode.pathOutsideProject, PipelineStage.preflight, { detail_code: "outside_skill", evidence: { resource } }),
        };
      if (read.refusal === "too_large")
        return { ok: false, failure: toolFailure(ReasonCode.fileTooLarge, PipelineStage.preflight, { evidence: { resource } }) };
      return invalid(read.refusal, "/offset", "Pass next_offset exactly as the previous read_skill returned it.");
    }
    const { resources, omitted } = await listSkillResources(skillDir, toolLimit("read_skill", "max_resources"));
    return {
      ok: true,
      result: {
        name: skill,
        source: "tenant",
        revision: skillRevision(markdown.bytes),
        ...(resource !== undefined ? { resource } : {}),
        body: read.body,
        complete: read.complete,
        ...(read.next_offset !== undefined ? { next_offset: read.next_offset } : {}),
        // Paths inside the skill: read them with read_skill {skill, resource}.
        resources,
        ...(omitted > 0 ? { resources_omitted: omitted } : {}),
      },
    };
  }

  const handlers: SkillHandlers = { list_skills: listSkills, read_skill: readSkill };

  return {
    /**
     * Runs list_skills or read_skill with the call's normalized arguments (the one place they are
     * taken as the tool's ToolInput); undefined for any other tool.
     */
    run(def: ToolDefinition, args: Json, ctx: CallContext, callId: string): Promise<Outcome> | undefined {
      const handler = Object.hasOwn(handlers, def.name) ? (handlers[def.name as keyof SkillHandlers] as WireHandler) : undefined;
      return handler?.(def, args, ctx, callId);
    },
  };
}

function notFound(skill: string): Outcome {
  return { ok: false, failure: toolFailure(ReasonCode.skillNotFound, PipelineStage.resolution, { detail_code: "skill_not_found", evidence: { skill } }) };
}

function invalid(detail: string, field: string, message: string): { ok: false; failure: ToolFailure } {
  return { ok: false, failure: toolFailure(ReasonCode.invalidValue, PipelineStage.normalization, { detail_code: detail, evidence: { field }, message }) };
}
