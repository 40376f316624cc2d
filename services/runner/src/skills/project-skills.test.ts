import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isToolFailureError, toolLimit } from "@webcodex/contracts";
import { listProjectSkills, readProjectSkill } from "./project-skills.js";

const skillMd = (name: string, body = "Steps.\n") => `---\nname: ${name}\ndescription: Does ${name}\n---\n${body}`;

async function write(root: string, rel: string, text: string) {
  await mkdir(join(root, rel, ".."), { recursive: true });
  await writeFile(join(root, rel), text);
}

test("project skills come from .agents/skills then .claude/skills; the first of a name shadows the later one and says so", async () => {
  const root = await mkdtemp(join(tmpdir(), "wc-pskills-"));
  try {
    await write(root, ".agents/skills/fmt/SKILL.md", skillMd("fmt"));
    await write(root, ".claude/skills/fmt/SKILL.md", skillMd("fmt"));
    await write(root, ".claude/skills/test/SKILL.md", skillMd("test"));
    const skills = await listProjectSkills(root);
    assert.deepEqual(
      skills.map((s) => [s.name, s.path, s.shadows]),
      [
        ["fmt", ".agents/skills/fmt/SKILL.md", [".claude/skills/fmt/SKILL.md"]],
        ["test", ".claude/skills/test/SKILL.md", undefined],
      ],
    );
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test("a skill root that is a symbolic link out of the workspace is not read", async () => {
  const root = await mkdtemp(join(tmpdir(), "wc-pskills-"));
  const outside = await mkdtemp(join(tmpdir(), "wc-outside-"));
  try {
    await write(outside, "leak/SKILL.md", skillMd("leak"));
    await mkdir(join(root, ".agents"));
    await symlink(outside, join(root, ".agents", "skills"));
    assert.deepEqual(await listProjectSkills(root), []);
    await assert.rejects(readProjectSkill(root, { skill: "leak" }), (e) => isToolFailureError(e) && e.failure.reason_code === "skill_not_found");
  } finally {
    await rm(root, { recursive: true, force: true });
    await rm(outside, { recursive: true, force: true });
  }
});

test("read_skill's project part: a body over the limit continues at next_offset to the exact file; resources are project paths", async () => {
  const root = await mkdtemp(join(tmpdir(), "wc-pskills-"));
  try {
    const body = "Ünïcode line ✓\n".repeat(Math.ceil((toolLimit("read_skill", "body_bytes") * 2.5) / 17));
    await write(root, ".agents/skills/big/SKILL.md", skillMd("big", body));
    await write(root, ".agents/skills/big/references/guide.md", "# guide\n");
    const file = await readFile(join(root, ".agents/skills/big/SKILL.md"));
    let out = "";
    let offset: number | undefined;
    let calls = 0;
    for (;;) {
      const r = await readProjectSkill(root, { skill: "big", ...(offset !== undefined ? { offset } : {}) });
      calls++;
      out += r["body"] as string;
      assert.deepEqual(r["resources"], [{ path: ".agents/skills/big/references/guide.md", bytes: 8 }]);
      if (r["complete"] === true) break;
      offset = r["next_offset"] as number;
    }
    assert.equal(calls, 3);
    assert.ok(Buffer.from(out, "utf8").equals(file));
    const guide = await readProjectSkill(root, { skill: "big", resource: "references/guide.md" });
    assert.equal(guide["body"], "# guide\n");
    // A folder without SKILL.md in the first root is the skill the catalog lists (invalid); it is not skipped for a later root.
    await write(root, ".agents/skills/half/notes.md", "x\n");
    await write(root, ".claude/skills/half/SKILL.md", skillMd("half"));
    await assert.rejects(readProjectSkill(root, { skill: "half" }), (e) => isToolFailureError(e) && e.failure.detail_code === "skill_md_unreadable");
    assert.deepEqual(
      (await listProjectSkills(root)).filter((s) => s.name === "half").map((s) => [s.path, s.valid, s.shadows]),
      [[".agents/skills/half/SKILL.md", false, [".claude/skills/half/SKILL.md"]]],
    );
    await assert.rejects(readProjectSkill(root, { skill: "../x" }), (e) => isToolFailureError(e) && e.failure.reason_code === "skill_not_found");
    await assert.rejects(
      readProjectSkill(root, { skill: "big", offset: file.length + 1 }),
      (e) => isToolFailureError(e) && e.failure.detail_code === "offset_beyond_end",
    );
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
