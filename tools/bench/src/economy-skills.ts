/**
 * The economy bench's skill task: "follow a project skill to do a change". The fixture project
 * carries a skill (`.agents/skills/release-note`) saying where and how a release note is
 * written; the task is to add one for a fix. Three scripted runs on the same project, each from
 * the same starting file:
 *
 * - without skills: a model that does not know skills exist searches for the convention, reads
 *   what matched and edits;
 * - with skills, cold: list_skills, read_skill, then the read and the edit the body asks for;
 * - with skills, warm: the catalog and the complete body (same revision) are already held from
 *   an earlier task, so only the read and the edit are paid (the spec's "reuse a complete
 *   applicable Skill body without ritual reload").
 *
 * Reported: calls and request+response bytes of each, whether the change was made exactly as
 * the skill says, and the bytes list_skills + read_skill would add to every tools/list if they
 * were Direct (their read_tool_manifest answers), the cost their Gateway exposure avoids.
 */
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { BenchResult } from "./stats.js";

type Json = Record<string, unknown>;
export type MeteredCall = (name: string, args: Json) => Promise<{ isError: boolean; structured: Json; text: string }>;
export interface MeteredRun {
  call: MeteredCall;
  calls: number;
  bytes: number;
}

const NOTES = "docs/releases/NEXT.md";
const NOTES_TEXT = "# Next release\n\n### Features\n\n- [cart] totals in cents (#101)\n\n### Fixes\n\n- [orders] keep the order date (#98)\n";
const SKILL = `---
name: release-note
description: Add a release note for a change, in this project's format. Use for every user-visible fix or feature.
---
# Release notes

Every user-visible change gets one line in \`${NOTES}\`:

1. Read \`${NOTES}\`.
2. Under \`### Fixes\` (bugs) or \`### Features\` (new behaviour), add one line at the end of that list:
   \`- [<area>] <summary in lower case> (#<ticket>)\`
3. Do not touch any other section.
`;
/** What the task asks for, as a user would. */
const TASK = { area: "tax", summary: "round tax to cents", ticket: 120 };
const EXPECTED_LINE = `- [${TASK.area}] ${TASK.summary} (#${TASK.ticket})`;

/** Writes the skill and the release notes into the fixture (before its server starts). */
export function addSkillFixture(root: string): void {
  for (const [path, text] of [
    [".agents/skills/release-note/SKILL.md", SKILL],
    [NOTES, NOTES_TEXT],
  ] as const) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), text);
  }
}

const gw = (m: MeteredRun, tool: string, args: Json) => m.call("call_runtime_tool", { tool, arguments: args });
const items = (r: Json) => (r["items"] ?? []) as Json[];

/** The edit the skill's steps describe, given the notes file as read. */
async function addNote(m: MeteredRun, project: string, revision: unknown): Promise<void> {
  const fixes = "### Fixes\n\n- [orders] keep the order date (#98)\n";
  await m.call("edit_project_files", {
    project,
    changes: [
      { kind: "edit", path: NOTES, expected_read_revision: revision, edits: [{ replace_exact: { old_text: fixes, new_text: `${fixes}${EXPECTED_LINE}\n` } }] },
    ],
  });
}

const done = (root: string) => readFileSync(join(root, NOTES), "utf8") === NOTES_TEXT.replace("(#98)\n", `(#98)\n${EXPECTED_LINE}\n`);

async function withoutSkills(m: MeteredRun, project: string): Promise<void> {
  // The convention is somewhere in the repository: look for it, then read what matched.
  const found = await m.call("search_project_texts", { project, queries: [{ pattern: "release note", output: "files" }] });
  const files = ((((found.structured["results"] as Json[]) ?? [])[0] ?? {})["files"] ?? []) as Json[];
  const paths = [...new Set([...files.map((f) => String(f["path"])), NOTES])];
  const read = await m.call("read_files", { project, files: paths.map((path) => ({ path })) });
  await addNote(m, project, items(read.structured).find((i) => i["path"] === NOTES)?.["read_revision"]);
}

async function withSkills(m: MeteredRun, project: string, warm: boolean): Promise<void> {
  if (!warm) {
    const listed = await gw(m, "list_skills", { project });
    const skill = ((listed.structured["skills"] ?? []) as Json[]).find((s) => String(s["description"]).includes("release note"));
    const body = await gw(m, "read_skill", { project, skill: skill?.["name"] });
    if (body.structured["complete"] !== true || !String(body.structured["body"]).includes(NOTES)) return;
  }
  const read = await m.call("read_files", { project, files: [{ path: NOTES }] });
  await addNote(m, project, items(read.structured)[0]?.["read_revision"]);
}

/** Runs the three variants on `root` (served as `project`), each from the original notes file. */
export async function benchFollowSkill(root: string, project: string, metered: () => MeteredRun): Promise<BenchResult> {
  const runs: Record<string, { calls: number; bytes: number; done: boolean }> = {};
  for (const [name, run] of [
    ["without_skills", (m: MeteredRun) => withoutSkills(m, project)],
    ["with_skills", (m: MeteredRun) => withSkills(m, project, false)],
    ["with_skills_warm", (m: MeteredRun) => withSkills(m, project, true)],
  ] as const) {
    writeFileSync(join(root, NOTES), NOTES_TEXT);
    const m = metered();
    const ok = await run(m).then(
      () => done(root),
      () => false,
    );
    runs[name] = { calls: m.calls, bytes: m.bytes, done: ok };
  }
  // What Direct exposure would add to every tools/list: the two descriptors (their manifests).
  const probe = metered();
  for (const tool of ["list_skills", "read_skill"]) await probe.call("read_tool_manifest", { tool });
  const metrics: Record<string, number> = {};
  for (const [name, r] of Object.entries(runs))
    Object.assign(metrics, { [`${name}_calls`]: r.calls, [`${name}_bytes`]: r.bytes, [`${name}_done`]: r.done ? 1 : 0 });
  metrics["direct_descriptors_bytes_upper_bound"] = probe.bytes;
  return {
    name: "economy_follow_project_skill",
    metrics,
    notes:
      "add a release note the way the project's skill says; without skills (search + read + edit), with skills cold (list_skills + read_skill + read + edit) and warm (catalog and complete body held: read + edit); Gateway exposure, so each skill call is call_runtime_tool",
  };
}
