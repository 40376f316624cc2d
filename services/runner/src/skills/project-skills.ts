/**
 * The project's Agent Skills, read by its Runner like any other workspace file: the folders
 * under `.agents/skills` and `.claude/skills`. The Runner answers the whole list (the gateway
 * merges it with the tenant's catalog and pages it within the catalog budget) and slices of
 * one skill's files. Roots and skill folders that are symbolic links are never followed, so a
 * read never leaves the workspace.
 */
import { lstat } from "node:fs/promises";
import { join } from "node:path";
import { fail, PipelineStage, ReasonCode, toolLimit } from "@webcodex/contracts";
import type { RunnerCapabilityId, ToolInput } from "@webcodex/contracts";
import { listSkillResources, readSkillSlice, scanSkillRoot, skillRevision, sliceUtf8, SKILL_FILE_MAX_BYTES } from "@webcodex/platform/skills";
import type { SkillEntry } from "@webcodex/platform/skills";
import type { ToolHandler } from "../runner-service.js";

/** The project's skill roots, in precedence order: a name in the first shadows the same name in the second. */
export const PROJECT_SKILL_ROOTS = [".agents/skills", ".claude/skills"] as const;

/** What the Runner is given: the catalog's arguments less the Project, which the gateway resolved. */
type ReadArgs = Omit<ToolInput<"read_skill">, "project">;

/** True when every component of `rel` under `root` is a real directory (no symbolic link). */
async function realDirectory(root: string, rel: string): Promise<boolean> {
  let at = root;
  for (const part of rel.split("/")) {
    at = join(at, part);
    const s = await lstat(at).catch(() => undefined);
    if (!s || s.isSymbolicLink() || !s.isDirectory()) return false;
  }
  return true;
}

/**
 * Every project skill, name-sorted, one entry per name: the first root's wins and says which
 * later path it shadows (`shadows`), so nothing is dropped silently.
 */
export async function listProjectSkills(root: string): Promise<Array<SkillEntry & { shadows?: string[] }>> {
  const byName = new Map<string, SkillEntry & { shadows?: string[] }>();
  for (const rel of PROJECT_SKILL_ROOTS) {
    if (!(await realDirectory(root, rel))) continue;
    for (const entry of await scanSkillRoot(join(root, rel), rel)) {
      const first = byName.get(entry.name);
      if (first) byName.set(entry.name, { ...first, shadows: [...(first.shadows ?? []), entry.path] });
      else byName.set(entry.name, entry);
    }
  }
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** A slice of one project skill's SKILL.md (or resource); skill_not_found when the project has no such skill. */
export async function readProjectSkill(root: string, args: ReadArgs): Promise<Record<string, unknown>> {
  const limit = toolLimit("read_skill", "body_bytes");
  const offset = args.offset ?? 0;
  const named = !args.skill.includes("/") && !args.skill.startsWith(".");
  for (const rel of named ? PROJECT_SKILL_ROOTS : []) {
    if (!(await realDirectory(root, `${rel}/${args.skill}`))) continue;
    const dir = join(root, rel, args.skill);
    const markdown = await readSkillSlice(dir, undefined, 0, SKILL_FILE_MAX_BYTES);
    // The first root with the folder is the skill, as list_skills shows it (shadowing the rest).
    if (!markdown.ok)
      return fail(ReasonCode.skillNotFound, PipelineStage.resolution, {
        detail_code: "skill_md_unreadable",
        evidence: { skill: args.skill, path: `${rel}/${args.skill}/SKILL.md` },
      });
    // The body and its revision come from the same bytes, so a revision always names what was read.
    const read = args.resource === undefined ? sliceUtf8(markdown.bytes, offset, limit) : await readSkillSlice(dir, args.resource, offset, limit);
    return sliceResult(read, args, rel, dir, markdown.bytes);
  }
  return fail(ReasonCode.skillNotFound, PipelineStage.resolution, { detail_code: "skill_not_found", evidence: { skill: args.skill } });
}

async function sliceResult(
  read: Awaited<ReturnType<typeof readSkillSlice>> | ReturnType<typeof sliceUtf8>,
  args: ReadArgs,
  rel: string,
  dir: string,
  skillMd: Buffer,
): Promise<Record<string, unknown>> {
  if (!read.ok) {
    if (read.refusal === "not_found")
      return fail(ReasonCode.skillNotFound, PipelineStage.resolution, {
        detail_code: "resource_not_found",
        evidence: { skill: args.skill, resource: args.resource },
      });
    if (read.refusal === "outside_skill")
      return fail(ReasonCode.pathOutsideProject, PipelineStage.preflight, { detail_code: "outside_skill", evidence: { resource: args.resource } });
    if (read.refusal === "too_large") return fail(ReasonCode.fileTooLarge, PipelineStage.preflight, { evidence: { resource: args.resource } });
    return fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: read.refusal, evidence: { field: "/offset", offset: args.offset } });
  }
  const { resources, omitted } = await listSkillResources(dir, toolLimit("read_skill", "max_resources"));
  return {
    name: args.skill,
    source: "project",
    revision: skillRevision(skillMd),
    path: `${rel}/${args.skill}/${args.resource ?? "SKILL.md"}`,
    ...(args.resource !== undefined ? { resource: args.resource } : {}),
    body: read.body,
    complete: read.complete,
    ...(read.next_offset !== undefined ? { next_offset: read.next_offset } : {}),
    // Project-relative paths: read them with read_files like any project file.
    resources: resources.map((r) => ({ path: `${rel}/${args.skill}/${r.path}`, bytes: r.bytes })),
    ...(omitted > 0 ? { resources_omitted: omitted } : {}),
  };
}

/** The two skill handlers and the capability they provide. */
export function projectSkillHandlers(root: string): { tools: Record<string, ToolHandler>; capabilities: readonly RunnerCapabilityId[] } {
  return {
    tools: {
      list_skills: async () => ({ skills: await listProjectSkills(root) }),
      read_skill: async (args: unknown) => readProjectSkill(root, args as ReadArgs),
    },
    capabilities: ["projectSkills"],
  };
}
