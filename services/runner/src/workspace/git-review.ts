/**
 * Git review observations: what changed in the work tree (against HEAD or a base), and the
 * bounded hunks. Paths are relative to the workspace root (`--relative`), untracked files are
 * listed with their line count when it is cheap to know, and absent counts mean "unknown",
 * never zero.
 */
import { lstat, readFile } from "node:fs/promises";
import path from "node:path";
import { FailureStage, ReasonCode, fail } from "@webcodex/contracts";
import { assertGitRepository, currentBranch, emptyTree, headCommit, resolveCommit, runGit } from "./git-cli.js";
import type { PathResolver } from "./path-policy.js";
import { isBinary, lineStarts } from "./text-bytes.js";
import { parseNameStatus, parseNumStat, parseUnifiedDiff } from "./unified-diff.js";
import type {
  FileChangeStat,
  GitDiffHunksRequest,
  GitDiffHunksResult,
  GitReviewSummaryRequest,
  GitReviewSummaryResult,
  WorkspaceChangesResult,
} from "./types.js";

export const DEFAULT_MAX_HUNKS = 50;
export const DEFAULT_CONTEXT_LINES = 3;
export const MAX_HUNK_LINES = 200;
export const MAX_HUNK_LINE_CHARS = 1000;
/** Listed changed files per call; the totals still cover every file. */
export const MAX_LISTED_CHANGES = 1000;
/** Untracked files whose lines are counted, and the size above which they are not. */
const MAX_COUNTED_UNTRACKED = 200;
const MAX_COUNTED_BYTES = 8 * 1024 * 1024;

const DIFF = ["diff", "--no-ext-diff", "--no-textconv", "--no-color", "-M", "--relative"];

export async function readWorkspaceChanges(resolver: PathResolver): Promise<WorkspaceChangesResult> {
  const cwd = resolver.rootReal;
  await assertGitRepository(cwd);
  const [head, branch] = await Promise.all([headCommit(cwd), currentBranch(cwd)]);
  const changes = await collectChanges(cwd, head ?? (await emptyTree(cwd)));
  const result: WorkspaceChangesResult = {
    changes: changes.slice(0, MAX_LISTED_CHANGES),
    total_changes: changes.length,
    truncated: changes.length > MAX_LISTED_CHANGES,
  };
  if (branch !== undefined) result.branch = branch;
  if (head !== undefined) result.head = head;
  return result;
}

export async function readGitReviewSummary(resolver: PathResolver, request: GitReviewSummaryRequest): Promise<GitReviewSummaryResult> {
  const cwd = resolver.rootReal;
  await assertGitRepository(cwd);
  const base = request.base ?? "HEAD";
  let baseCommit: string | undefined;
  if (base === "HEAD") baseCommit = await headCommit(cwd);
  else baseCommit = await resolveCommit(cwd, base);
  const files = await collectChanges(cwd, baseCommit ?? (await emptyTree(cwd)));
  const totals = { files: files.length, added_lines: 0, removed_lines: 0 };
  for (const file of files) {
    totals.added_lines += file.added_lines ?? 0;
    totals.removed_lines += file.removed_lines ?? 0;
  }
  const result: GitReviewSummaryResult = {
    base,
    files: files.slice(0, MAX_LISTED_CHANGES),
    truncated: files.length > MAX_LISTED_CHANGES,
    totals,
  };
  if (baseCommit !== undefined) result.base_commit = baseCommit;
  return result;
}

export async function readGitDiffHunks(resolver: PathResolver, request: GitDiffHunksRequest): Promise<GitDiffHunksResult> {
  const maxHunks = request.max_hunks ?? DEFAULT_MAX_HUNKS;
  const contextLines = request.context_lines ?? DEFAULT_CONTEXT_LINES;
  if (!Number.isInteger(maxHunks) || maxHunks < 1) {
    fail(ReasonCode.invalidValue, FailureStage.preflight, { detail_code: "max_hunks_not_positive", evidence: { max_hunks: maxHunks } });
  }
  if (!Number.isInteger(contextLines) || contextLines < 0) {
    fail(ReasonCode.invalidValue, FailureStage.preflight, { detail_code: "context_lines_negative", evidence: { context_lines: contextLines } });
  }
  const cwd = resolver.rootReal;
  // Paths go through the same policy as every other tool, then to git as literal pathspecs.
  const pathspecs: string[] = [];
  for (const requested of request.paths ?? []) {
    const resolved = await resolver.resolve(requested, { allowRoot: true });
    pathspecs.push(resolved.rel === "" ? "." : `:(literal)${resolved.rel}`);
  }
  await assertGitRepository(cwd);
  const base = (await headCommit(cwd)) ?? (await emptyTree(cwd));
  const out = await runGit(cwd, [...DIFF, `-U${contextLines}`, "--src-prefix=a/", "--dst-prefix=b/", base, "--", ...pathspecs]);
  const parsed = parseUnifiedDiff(out.stdout, { maxHunks, maxLinesPerHunk: MAX_HUNK_LINES, maxLineChars: MAX_HUNK_LINE_CHARS });
  return { hunks: parsed.hunks, total_hunks: parsed.totalHunks, truncated: parsed.totalHunks > parsed.hunks.length };
}

/** Tracked changes of the work tree against `base` (staged and unstaged together) plus untracked files, sorted by path. */
async function collectChanges(cwd: string, base: string): Promise<FileChangeStat[]> {
  const [names, numbers, others] = await Promise.all([
    runGit(cwd, [...DIFF, "-z", "--name-status", base, "--"]),
    runGit(cwd, [...DIFF, "-z", "--numstat", base, "--"]),
    runGit(cwd, ["ls-files", "--others", "--exclude-standard", "-z", "--", "."]),
  ]);
  const counts = parseNumStat(numbers.stdout);
  const changes: FileChangeStat[] = parseNameStatus(names.stdout).map((entry) => {
    const change: FileChangeStat = { path: entry.path, status: entry.status };
    if (entry.previous_path !== undefined) change.previous_path = entry.previous_path;
    const stat = counts.get(entry.path);
    if (stat?.binary === true) change.binary = true;
    else if (stat?.added !== undefined && stat.removed !== undefined) {
      change.added_lines = stat.added;
      change.removed_lines = stat.removed;
    }
    return change;
  });

  const untracked = others.stdout.split("\0").filter((p) => p !== "");
  const untrackedChanges = await Promise.all(
    untracked.map(async (relPath, index): Promise<FileChangeStat> => {
      const change: FileChangeStat = { path: relPath, status: "untracked" };
      if (index >= MAX_COUNTED_UNTRACKED) return change;
      const counted = await countLines(path.join(cwd, relPath));
      if (counted === "binary") change.binary = true;
      else if (counted !== undefined) {
        change.added_lines = counted;
        change.removed_lines = 0;
      }
      return change;
    }),
  );
  return [...changes, ...untrackedChanges].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Lines a new file would add (as git counts them), "binary", or undefined when not cheaply knowable. */
async function countLines(file: string): Promise<number | "binary" | undefined> {
  try {
    // lstat first: opening a FIFO would block.
    const info = await lstat(file);
    if (!info.isFile() || info.size > MAX_COUNTED_BYTES) return undefined;
    const bytes = await readFile(file);
    if (isBinary(bytes)) return "binary";
    return lineStarts(bytes).length;
  } catch {
    return undefined;
  }
}
