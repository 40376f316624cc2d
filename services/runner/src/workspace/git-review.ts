/**
 * Git review observations: what changed in the work tree (against HEAD or a base), and the
 * bounded hunks. Paths are relative to the workspace root (`--relative`), untracked files are
 * listed with their line count when it is cheap to know. Unknown counts are absent and flagged
 * (counts_unknown), never zero, and totals that miss them say they are lower bounds.
 */
import { lstat, readFile } from "node:fs/promises";
import path from "node:path";
import { clampRule, PipelineStage, ReasonCode, fail } from "@webcodex/contracts";
import type { Spawner } from "../exec/spawner.js";
import { assertGitRepository, currentBranch, emptyTree, headCommit, resolveCommit, runGit, runGitBounded, type GitContext } from "./git-cli.js";
import type { PathResolver } from "./path-policy.js";
import { isBinary, lineStarts } from "./text-bytes.js";
import { parseNameStatus, parseNumStat, parseUnifiedDiff } from "./unified-diff.js";
import type {
  FileChangeStat,
  GitDiffHunksRequest,
  GitDiffHunksResult,
  GitReviewSummaryRequest,
  GitReviewSummaryResult,
  ReviewTotals,
  WorkspaceChangesResult,
} from "./types.js";

export const DEFAULT_MAX_HUNKS = clampRule("read_git_diff_hunks", "max_hunks").default;
export const DEFAULT_CONTEXT_LINES = clampRule("read_git_diff_hunks", "context_lines").default;
export const MAX_HUNK_LINES = 200;
export const MAX_HUNK_LINE_CHARS = 1000;
/** Bytes of `git diff` read per call; past it the answer is cut and says so. */
export const MAX_DIFF_OUTPUT_BYTES = 16 * 1024 * 1024;
/** Listed changed files per call; the totals still cover every file. */
export const MAX_LISTED_CHANGES = 1000;
/** Untracked files whose lines are counted, and the size above which they are not. */
export const MAX_COUNTED_UNTRACKED = 200;
const MAX_COUNTED_BYTES = 8 * 1024 * 1024;

const DIFF = ["diff", "--no-ext-diff", "--no-textconv", "--no-color", "-M", "--relative"];

export async function readWorkspaceChanges(resolver: PathResolver, spawner: Spawner): Promise<WorkspaceChangesResult> {
  const git: GitContext = { cwd: resolver.rootReal, spawner };
  await assertGitRepository(git);
  const [head, branch] = await Promise.all([headCommit(git), currentBranch(git)]);
  const changes = await collectChanges(git, head ?? (await emptyTree(git)));
  const result: WorkspaceChangesResult = {
    changes: changes.slice(0, MAX_LISTED_CHANGES),
    total_changes: changes.length,
    truncated: changes.length > MAX_LISTED_CHANGES,
  };
  if (branch !== undefined) result.branch = branch;
  if (head !== undefined) result.head = head;
  return result;
}

export async function readGitReviewSummary(resolver: PathResolver, spawner: Spawner, request: GitReviewSummaryRequest): Promise<GitReviewSummaryResult> {
  const git: GitContext = { cwd: resolver.rootReal, spawner };
  await assertGitRepository(git);
  const base = request.base ?? "HEAD";
  let baseCommit: string | undefined;
  if (base === "HEAD") baseCommit = await headCommit(git);
  else baseCommit = await resolveCommit(git, base);
  const files = await collectChanges(git, baseCommit ?? (await emptyTree(git)));
  const totals = reviewTotals(files);
  const result: GitReviewSummaryResult = {
    base,
    files: files.slice(0, MAX_LISTED_CHANGES),
    truncated: files.length > MAX_LISTED_CHANGES,
    totals,
  };
  if (baseCommit !== undefined) result.base_commit = baseCommit;
  return result;
}

export async function readGitDiffHunks(resolver: PathResolver, spawner: Spawner, request: GitDiffHunksRequest): Promise<GitDiffHunksResult> {
  const maxHunks = request.max_hunks ?? DEFAULT_MAX_HUNKS;
  const contextLines = request.context_lines ?? DEFAULT_CONTEXT_LINES;
  if (!Number.isInteger(maxHunks) || maxHunks < 1) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "max_hunks_not_positive", evidence: { max_hunks: maxHunks } });
  }
  if (!Number.isInteger(contextLines) || contextLines < 0) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "context_lines_negative", evidence: { context_lines: contextLines } });
  }
  const git: GitContext = { cwd: resolver.rootReal, spawner };
  // Paths go through the same policy as every other tool, then to git as literal pathspecs.
  const pathspecs: string[] = [];
  for (const requested of request.paths ?? []) {
    const resolved = await resolver.resolve(requested, { allowRoot: true });
    pathspecs.push(resolved.rel === "" ? "." : `:(literal)${resolved.rel}`);
  }
  await assertGitRepository(git);
  const base = (await headCommit(git)) ?? (await emptyTree(git));
  const out = await runGitBounded(git, [...DIFF, `-U${contextLines}`, "--src-prefix=a/", "--dst-prefix=b/", base, "--", ...pathspecs], MAX_DIFF_OUTPUT_BYTES);
  const parsed = parseUnifiedDiff(out.stdout, { maxHunks, maxLinesPerHunk: MAX_HUNK_LINES, maxLineChars: MAX_HUNK_LINE_CHARS }, { cut: out.cut });
  const result: GitDiffHunksResult = { hunks: parsed.hunks, total_hunks: parsed.totalHunks, truncated: out.cut || parsed.totalHunks > parsed.hunks.length };
  if (out.cut) result.total_is_lower_bound = true;
  return result;
}

/** Line sums over the known counts; files without counts make them lower bounds, never zeros. */
export function reviewTotals(files: readonly FileChangeStat[]): ReviewTotals {
  const totals: ReviewTotals = { files: files.length, added_lines: 0, removed_lines: 0 };
  let unknown = 0;
  for (const file of files) {
    if (file.added_lines === undefined || file.removed_lines === undefined) {
      unknown++;
      continue;
    }
    totals.added_lines += file.added_lines;
    totals.removed_lines += file.removed_lines;
  }
  if (unknown > 0) {
    totals.lines_lower_bound = true;
    totals.files_with_unknown_counts = unknown;
  }
  return totals;
}

/** Tracked changes of the work tree against `base` (staged and unstaged together) plus untracked files, sorted by path. */
async function collectChanges(git: GitContext, base: string): Promise<FileChangeStat[]> {
  const [names, numbers, others] = await Promise.all([
    runGit(git, [...DIFF, "-z", "--name-status", base, "--"]),
    runGit(git, [...DIFF, "-z", "--numstat", base, "--"]),
    runGit(git, ["ls-files", "--others", "--exclude-standard", "-z", "--", "."]),
  ]);
  const counts = parseNumStat(numbers.stdout);
  const changes: FileChangeStat[] = parseNameStatus(names.stdout).map((entry) => {
    const change: FileChangeStat = { path: entry.path, status: entry.status };
    if (entry.previous_path !== undefined) change.previous_path = entry.previous_path;
    const stat = counts.get(entry.path);
    if (stat?.binary !== true && stat?.added !== undefined && stat.removed !== undefined) {
      change.added_lines = stat.added;
      change.removed_lines = stat.removed;
    } else {
      change.counts_unknown = true;
      if (stat?.binary === true) change.binary = true;
    }
    return change;
  });

  const untracked = others.stdout.split("\0").filter((p) => p !== "");
  const untrackedChanges = await Promise.all(
    untracked.map(async (relPath, index): Promise<FileChangeStat> => {
      const change: FileChangeStat = { path: relPath, status: "untracked" };
      const counted = index < MAX_COUNTED_UNTRACKED ? await countLines(path.join(git.cwd, relPath)) : undefined;
      if (typeof counted === "number") {
        change.added_lines = counted;
        change.removed_lines = 0;
      } else {
        change.counts_unknown = true;
        if (counted === "binary") change.binary = true;
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
