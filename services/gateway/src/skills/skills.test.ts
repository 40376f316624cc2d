import { test } from "node:test";
import assert from "node:assert/strict";
import { toolLimit } from "@webcodex/contracts";
import type { SkillEntry } from "@webcodex/platform/skills";
import { decodeSkillCursor, encodeSkillCursor, mergeSkills, pageSkills } from "./skills.js";
import type { SkillRow } from "./skills.js";

const entry = (name: string, extra: Partial<SkillEntry> = {}): SkillEntry => ({
  name,
  description: `Does ${name}`,
  revision: `sk_${name}`,
  valid: true,
  path: `.agents/skills/${name}/SKILL.md`,
  ...extra,
});

test("a project skill shadows the tenant skill of the same name and says so; the rest are listed with their source", () => {
  const rows = mergeSkills([entry("deploy"), entry("lint", { valid: false, problem: "description_missing: x" })], [entry("deploy"), entry("style")]);
  assert.deepEqual(
    rows.map((r) => [r.name, r.source, r.valid, r.shadows]),
    [
      ["deploy", "project", true, ["tenant"]],
      ["lint", "project", false, undefined],
      ["style", "tenant", true, undefined],
    ],
  );
  assert.equal(rows[1]?.problem, "description_missing: x");
});

test("500 skills page within the catalog budget: each page says how many it left out and the cursors walk the rest with no duplicate or gap", () => {
  const names = Array.from({ length: 500 }, (_, i) => `skill-${String(i).padStart(3, "0")}`);
  const rows = mergeSkills(
    names.map((n) => entry(n, { description: `A long enough description for ${n} `.repeat(3) })),
    [],
  );
  const budget = toolLimit("list_skills", "catalog_bytes");
  const seen: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    const page = pageSkills(rows, cursor === undefined ? undefined : decodeSkillCursor(cursor), budget);
    pages++;
    assert.ok(Buffer.byteLength(JSON.stringify(page.skills)) <= budget, `page ${pages} fits the budget`);
    seen.push(...page.skills.map((s: SkillRow) => s.name));
    assert.equal(page.omitted ?? 0, 500 - seen.length, "omitted counts exactly the skills not yet listed");
    if (page.next_cursor === undefined) break;
    cursor = page.next_cursor;
  }
  assert.ok(pages > 1);
  assert.deepEqual(seen, names);
});

test("a page always advances, even when one skill alone is over the budget", () => {
  const rows = mergeSkills([entry("a", { description: "x".repeat(1000) }), entry("b")], []);
  const page = pageSkills(rows, undefined, 10);
  assert.deepEqual(
    page.skills.map((s) => s.name),
    ["a"],
  );
  assert.equal(page.omitted, 1);
});

test("a cursor is only what a page returned", () => {
  assert.equal(decodeSkillCursor(encodeSkillCursor("skill-001")), "skill-001");
  assert.equal(decodeSkillCursor("skill-001"), undefined);
  assert.equal(decodeSkillCursor("sc1."), undefined);
  assert.equal(decodeSkillCursor("sc1.!!"), undefined);
});
