/**
 * Where a path that names nothing was probably meant: the entries of its nearest existing
 * directory (inside the project) whose names are most like the missing name, so a model can
 * correct the path without listing the project. Bounded in entries scanned and listed.
 */
import { readdirSync, statSync } from "node:fs";
import path from "node:path";

/** Paths listed in a path_not_found failure. */
export const SIMILAR_PATHS = 5;
/** Entries of the directory compared (a larger directory is compared up to here). */
const MAX_SCANNED_ENTRIES = 2_000;

export interface SimilarPaths {
  /** The nearest directory that exists, project-relative ("" is the root). */
  existing_parent: string;
  /** Its entries most like the missing name, best first; directories end in "/". */
  similar_paths: string[];
}

/** Edit distance of two short names (insertions, deletions, substitutions), capped for long names. */
function distance(a: string, b: string): number {
  if (a.length > 128 || b.length > 128) return Math.max(a.length, b.length);
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min((row[j] ?? 0) + 1, (next[j - 1] ?? 0) + 1, (row[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length] ?? 0;
}

const stem = (name: string): string => name.toLowerCase().replace(/\.[^.]*$/, "");

/**
 * The nearest existing directory of project-relative `rel` (under real root `rootReal`) and
 * its entries most like the first missing component: equal but for case or extension, or
 * within a few edits. Never throws: a directory it cannot read lists nothing.
 */
export function similarPaths(rootReal: string, rel: string): SimilarPaths {
  const parts = rel.split("/").filter((p) => p !== "");
  let depth = parts.length - 1;
  for (; depth > 0; depth--) {
    try {
      if (statSync(path.join(rootReal, ...parts.slice(0, depth))).isDirectory()) break;
    } catch {
      // Missing too: one level up.
    }
  }
  const parent = parts.slice(0, Math.max(depth, 0)).join("/");
  const missing = parts[Math.max(depth, 0)] ?? "";
  const scored: Array<{ name: string; dir: boolean; score: number }> = [];
  try {
    const entries = readdirSync(path.join(rootReal, parent), { withFileTypes: true }).slice(0, MAX_SCANNED_ENTRIES);
    const want = missing.toLowerCase();
    const budget = Math.max(2, Math.floor(want.length / 3));
    for (const entry of entries) {
      if (entry.name === ".git") continue;
      const name = entry.name.toLowerCase();
      const score = name === want ? 0 : stem(name) === stem(want) ? 1 : distance(name, want) + 1;
      if (score <= budget + 1) scored.push({ name: entry.name, dir: entry.isDirectory(), score });
    }
  } catch {
    // Unreadable: nothing to suggest.
  }
  scored.sort((a, b) => a.score - b.score || a.name.localeCompare(b.name));
  return {
    existing_parent: parent,
    similar_paths: scored.slice(0, SIMILAR_PATHS).map((s) => (parent === "" ? s.name : `${parent}/${s.name}`) + (s.dir ? "/" : "")),
  };
}
