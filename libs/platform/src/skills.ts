/**
 * Agent Skills on disk: folders with a `SKILL.md` (YAML front matter `name`, `description`, then
 * a Markdown body) and optional resource files. One reader serves both sources: a project's
 * skill roots (read by its Runner, inside the workspace) and a tenant's skill catalog (read by
 * the gateway from the directory the operator configured). Nothing here writes.
 *
 * A skill is listed under its folder name. A file that cannot be used is listed as invalid with
 * the reason, never dropped: missing or malformed front matter, a missing description, or a
 * front matter name that differs from the folder. Symbolic links are never followed.
 */
import { createHash } from "node:crypto";
import { lstat, open, readdir, readFile } from "node:fs/promises";
import { join, posix } from "node:path";
import { parseDocument } from "yaml";

/** The Agent Skills rules for a name: lowercase letters, digits and single hyphens, at most 64. */
const NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const NAME_MAX = 64;
/** The Agent Skills ceiling for a description. */
export const SKILL_DESCRIPTION_MAX_CHARS = 1024;
/** Skill folders read from one root; more are listed as one invalid entry saying so. */
export const SKILL_ROOT_MAX_FOLDERS = 2000;
/** Largest SKILL.md or resource read (a larger one is invalid / refused). */
export const SKILL_FILE_MAX_BYTES = 4 * 1024 * 1024;

export interface SkillEntry {
  /** The folder name: the identifier read_skill takes. */
  readonly name: string;
  /** The front matter description (cut to SKILL_DESCRIPTION_MAX_CHARS), or "" when it has none. */
  readonly description: string;
  /** An opaque token of the exact SKILL.md bytes ("" when unreadable). */
  readonly revision: string;
  readonly valid: boolean;
  readonly problem?: string;
  /** The SKILL.md path relative to where the root was given from (e.g. `.agents/skills/x/SKILL.md`). */
  readonly path: string;
}

/** The revision of a SKILL.md: a digest of its exact bytes. */
export function skillRevision(bytes: Uint8Array): string {
  return `sk_${createHash("sha256").update(bytes).digest("hex").slice(0, 20)}`;
}

/** The front matter facts of a SKILL.md text and what is wrong with it, if anything. */
export function parseSkillFile(text: string, folder: string): { description: string; valid: boolean; problem?: string } {
  const match = /^---\r?\n([\s\S]*?)\r?\n---(?:\r?\n|$)/.exec(text.replace(/^\uFEFF/, ""));
  if (!match) return { description: "", valid: false, problem: "front_matter_missing: SKILL.md does not start with a --- YAML front matter block" };
  const doc = parseDocument(match[1] as string, { prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const first = (doc.errors[0]?.message ?? "").split("\n")[0]?.slice(0, 160) ?? "";
    return { description: "", valid: false, problem: `front_matter_invalid: ${first}` };
  }
  const data: unknown = doc.toJS();
  if (data === null || typeof data !== "object" || Array.isArray(data))
    return { description: "", valid: false, problem: "front_matter_invalid: the front matter is not a mapping" };
  const fm = data as Record<string, unknown>;
  const rawDescription = typeof fm["description"] === "string" ? fm["description"].trim() : "";
  const description = rawDescription.slice(0, SKILL_DESCRIPTION_MAX_CHARS);
  const name = fm["name"];
  if (typeof name !== "string" || name.trim() === "") return { description, valid: false, problem: "name_missing: the front matter has no name" };
  if (name !== folder)
    return { description, valid: false, problem: `name_mismatch: the front matter name "${name.slice(0, 80)}" differs from the folder "${folder}"` };
  if (!NAME.test(name) || name.length > NAME_MAX)
    return { description, valid: false, problem: "name_invalid: lowercase letters, digits and single hyphens, at most 64 characters" };
  if (rawDescription === "") return { description, valid: false, problem: "description_missing: the front matter has no description" };
  if (rawDescription.length > SKILL_DESCRIPTION_MAX_CHARS)
    return { description, valid: false, problem: `description_too_long: over ${SKILL_DESCRIPTION_MAX_CHARS} characters (cut here)` };
  return { description, valid: true };
}

/**
 * The skills under one root (`<root>/<folder>/SKILL.md`), sorted by name. `shownAs` is the
 * root as the caller names it in `path` (e.g. `.agents/skills`). A missing root has no skills.
 */
export async function scanSkillRoot(root: string, shownAs: string): Promise<SkillEntry[]> {
  let names: string[];
  try {
    names = (await readdir(root, { withFileTypes: true })).filter((d) => d.isDirectory() || d.isSymbolicLink()).map((d) => d.name);
  } catch {
    return [];
  }
  names.sort();
  const entries: SkillEntry[] = [];
  for (const folder of names.slice(0, SKILL_ROOT_MAX_FOLDERS)) {
    if (folder.startsWith(".")) continue;
    entries.push(await readSkillEntry(join(root, folder), folder, posix.join(shownAs, folder, "SKILL.md")));
  }
  if (names.length > SKILL_ROOT_MAX_FOLDERS)
    entries.push({
      name: names[SKILL_ROOT_MAX_FOLDERS] as string,
      description: "",
      revision: "",
      valid: false,
      problem: `too_many_skills: ${shownAs} has ${names.length} folders; only the first ${SKILL_ROOT_MAX_FOLDERS} are read`,
      path: shownAs,
    });
  return entries;
}

async function readSkillEntry(dir: string, folder: string, path: string): Promise<SkillEntry> {
  const invalid = (problem: string): SkillEntry => ({ name: folder, description: "", revision: "", valid: false, problem, path });
  const dirStat = await lstat(dir).catch(() => undefined);
  if (!dirStat || dirStat.isSymbolicLink()) return invalid("symlink: the skill folder is a symbolic link, which is not followed");
  const file = join(dir, "SKILL.md");
  const stat = await lstat(file).catch(() => undefined);
  if (!stat) return invalid("skill_md_missing: the folder has no SKILL.md");
  if (!stat.isFile()) return invalid("skill_md_not_a_file: SKILL.md is a symbolic link or not a regular file");
  if (stat.size > SKILL_FILE_MAX_BYTES) return invalid(`skill_md_too_large: over ${SKILL_FILE_MAX_BYTES} bytes`);
  const bytes = await readFile(file).catch(() => undefined);
  if (!bytes) return invalid("skill_md_unreadable: SKILL.md could not be read");
  return { name: folder, ...parseSkillFile(bytes.toString("utf8"), folder), revision: skillRevision(bytes), path };
}

/** A resource of a skill: a file under its folder other than SKILL.md, path relative to the folder. */
export interface SkillResource {
  readonly path: string;
  readonly bytes: number;
}

/** Up to `max` resource files of a skill folder (sorted by path; no symbolic links) and how many more there are. */
export async function listSkillResources(dir: string, max: number): Promise<{ resources: SkillResource[]; omitted: number }> {
  const found: SkillResource[] = [];
  let total = 0;
  async function walk(rel: string, depth: number): Promise<void> {
    if (depth > 8) return;
    const entries = await readdir(join(dir, rel), { withFileTypes: true }).catch(() => []);
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const path = rel === "" ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory()) await walk(path, depth + 1);
      else if (e.isFile() && path !== "SKILL.md") {
        total++;
        if (found.length < max) found.push({ path, bytes: (await lstat(join(dir, path))).size });
      }
    }
  }
  await walk("", 0);
  return { resources: found, omitted: total - found.length };
}

/** Why a skill file read was refused. */
export type SkillReadRefusal = "not_found" | "outside_skill" | "offset_beyond_end" | "offset_inside_character" | "too_large";

/**
 * Reads a slice of a skill file (`SKILL.md`, or a resource path relative to the folder) from
 * byte `offset`, at most `limit` bytes, cut only between UTF-8 characters: the `body` strings
 * of the slices, concatenated in order, are the file exactly. `next_offset` is where the next
 * slice starts when this one is not the end.
 */
export async function readSkillSlice(
  dir: string,
  resource: string | undefined,
  offset: number,
  limit: number,
): Promise<{ ok: true; body: string; complete: boolean; next_offset?: number; bytes: Buffer } | { ok: false; refusal: SkillReadRefusal }> {
  const rel = resource ?? "SKILL.md";
  const parts = rel.split("/");
  if (rel === "" || rel.startsWith("/") || parts.some((p) => p === "" || p === "." || p === "..")) return { ok: false, refusal: "outside_skill" };
  // No component may be a symbolic link: the read stays inside the folder.
  let at = dir;
  const dirStat = await lstat(dir).catch(() => undefined);
  if (!dirStat || !dirStat.isDirectory()) return { ok: false, refusal: "not_found" };
  for (const [i, part] of parts.entries()) {
    at = join(at, part);
    const s = await lstat(at).catch(() => undefined);
    if (!s) return { ok: false, refusal: "not_found" };
    if (s.isSymbolicLink()) return { ok: false, refusal: "outside_skill" };
    if (i === parts.length - 1 && !s.isFile()) return { ok: false, refusal: "not_found" };
    if (i === parts.length - 1 && s.size > SKILL_FILE_MAX_BYTES) return { ok: false, refusal: "too_large" };
  }
  const handle = await open(at, "r");
  let bytes: Buffer;
  try {
    bytes = await handle.readFile();
  } finally {
    await handle.close();
  }
  const sliced = sliceUtf8(bytes, offset, limit);
  return sliced.ok ? { ...sliced, bytes } : sliced;
}

/** The slice of `bytes` from `offset` of at most `limit` bytes (at least one character), never splitting a UTF-8 character. */
export function sliceUtf8(
  bytes: Uint8Array,
  offset: number,
  limit: number,
): { ok: true; body: string; complete: boolean; next_offset?: number } | { ok: false; refusal: "offset_beyond_end" | "offset_inside_character" } {
  if (offset > bytes.length) return { ok: false, refusal: "offset_beyond_end" };
  const continuation = (i: number) => i < bytes.length && ((bytes[i] as number) & 0xc0) === 0x80;
  if (continuation(offset)) return { ok: false, refusal: "offset_inside_character" };
  let end = Math.min(bytes.length, offset + Math.max(4, limit));
  while (end > offset && continuation(end)) end--;
  const body = Buffer.from(bytes.buffer, bytes.byteOffset + offset, end - offset).toString("utf8");
  return end >= bytes.length ? { ok: true, body, complete: true } : { ok: true, body, complete: false, next_offset: end };
}
