import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { listSkillResources, parseSkillFile, readSkillSlice, scanSkillRoot, skillRevision, sliceUtf8 } from "./skills.js";

const skillMd = (name: string, description: string, body = "Steps.\n") => `---\nname: ${name}\ndescription: ${description}\n---\n${body}`;

test("a SKILL.md with name and description matching its folder is valid", () => {
  assert.deepEqual(parseSkillFile(skillMd("fmt", "Format code"), "fmt"), { description: "Format code", valid: true });
});

test("an unusable SKILL.md is invalid with the reason: no front matter, bad YAML, no description, name mismatch, no name", () => {
  const problem = (text: string, folder = "fmt") => parseSkillFile(text, folder).problem?.split(":")[0];
  assert.equal(problem("# no front matter\n"), "front_matter_missing");
  assert.equal(problem("---\nname: fmt\ndescription: [unclosed\n---\n"), "front_matter_invalid");
  assert.equal(problem("---\nname: fmt\nname: again\ndescription: d\n---\n"), "front_matter_invalid");
  assert.equal(problem("---\nname: fmt\n---\nbody\n"), "description_missing");
  assert.equal(problem(skillMd("other", "d")), "name_mismatch");
  assert.equal(problem("---\ndescription: d\n---\n"), "name_missing");
  assert.equal(problem("---\n- a\n- b\n---\n"), "front_matter_invalid");
  const long = parseSkillFile(skillMd("fmt", "x".repeat(1100)), "fmt");
  assert.equal(long.valid, false);
  assert.equal(long.description.length, 1024);
});

test("slices never split a UTF-8 character and concatenate to the exact bytes", () => {
  const text = "héllo wörld — ✓ 😀 ".repeat(50);
  const bytes = Buffer.from(text, "utf8");
  for (const limit of [4, 5, 7, 64, 1000]) {
    let offset = 0;
    let out = "";
    for (;;) {
      const s = sliceUtf8(bytes, offset, limit);
      assert.ok(s.ok);
      out += s.body;
      if (s.complete) break;
      assert.ok((s.next_offset as number) > offset);
      offset = s.next_offset as number;
    }
    assert.ok(Buffer.from(out, "utf8").equals(bytes), `limit ${limit}`);
  }
  assert.deepEqual(sliceUtf8(bytes, bytes.length + 1, 10), { ok: false, refusal: "offset_beyond_end" });
  assert.deepEqual(sliceUtf8(Buffer.from("é"), 1, 10), { ok: false, refusal: "offset_inside_character" });
});

test("a skill root lists every folder by name, invalid ones with their reason; symbolic links are not followed", async () => {
  const dir = await mkdtemp(join(tmpdir(), "wc-skills-"));
  try {
    await mkdir(join(dir, "b-skill"));
    await writeFile(join(dir, "b-skill", "SKILL.md"), skillMd("b-skill", "B"));
    await mkdir(join(dir, "a-skill", "scripts"), { recursive: true });
    await writeFile(join(dir, "a-skill", "SKILL.md"), skillMd("wrong", "A"));
    await writeFile(join(dir, "a-skill", "scripts", "run.sh"), "echo hi\n");
    await mkdir(join(dir, "empty"));
    const outside = await mkdtemp(join(tmpdir(), "wc-outside-"));
    await writeFile(join(outside, "SKILL.md"), skillMd("linked", "L"));
    await symlink(outside, join(dir, "linked"));
    const entries = await scanSkillRoot(dir, ".agents/skills");
    assert.deepEqual(
      entries.map((e) => [e.name, e.valid, e.problem?.split(":")[0], e.path]),
      [
        ["a-skill", false, "name_mismatch", ".agents/skills/a-skill/SKILL.md"],
        ["b-skill", true, undefined, ".agents/skills/b-skill/SKILL.md"],
        ["empty", false, "skill_md_missing", ".agents/skills/empty/SKILL.md"],
        ["linked", false, "symlink", ".agents/skills/linked/SKILL.md"],
      ],
    );
    assert.equal(entries[1]?.revision, skillRevision(Buffer.from(skillMd("b-skill", "B"))));
    assert.deepEqual(await listSkillResources(join(dir, "a-skill"), 10), { resources: [{ path: "scripts/run.sh", bytes: 8 }], omitted: 0 });
    assert.deepEqual(await listSkillResources(join(dir, "a-skill"), 0), { resources: [], omitted: 1 });
    const read = await readSkillSlice(join(dir, "a-skill"), "scripts/run.sh", 0, 100);
    assert.ok(read.ok && read.body === "echo hi\n" && read.complete);
    assert.deepEqual(await readSkillSlice(join(dir, "a-skill"), "../b-skill/SKILL.md", 0, 100), { ok: false, refusal: "outside_skill" });
    assert.deepEqual(await readSkillSlice(join(dir, "linked"), undefined, 0, 100), { ok: false, refusal: "not_found" });
    assert.deepEqual(await scanSkillRoot(join(dir, "missing"), "x"), []);
    await rm(outside, { recursive: true, force: true });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
