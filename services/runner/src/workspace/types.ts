/**
 * Canonical request and result types of the Runner workspace engine. Requests arrive already
 * canonical (the `project` selector removed, ceilings clamped by the caller), so their types are
 * the catalog's input schemas as RunnerArguments; results are the full canonical truth, which
 * the model projection later thins out.
 *
 * One concept over 400 lines: the workspace engine's request and result types.
 */
import type { RunnerArguments, ToolFailure } from "@webcodex/contracts";
import type { Spawner } from "../exec/spawner.js";

// ---------------------------------------------------------------- options

import type { EditJournal, RecoveredTransaction } from "./edit-journal.js";

export interface WorkspaceHooks {
  /**
   * Called after each change reached the disk with its project-relative path and its index in
   * `changes`. A throw here is an apply failure and triggers the rollback (a test seam).
   */
  afterFileApplied?: (path: string, index: number) => void | Promise<void>;
}

export interface WorkspaceOptions {
  /** Absolute path of the workspace root. */
  root: string;
  /** Globs (project-relative) refused for writes; replaces the defaults when given. `.git/` is always refused. */
  sensitiveWriteGlobs?: string[];
  /** ripgrep binary; defaults to the one shipped by `@vscode/ripgrep`. */
  rgPath?: string;
  /** How long one rg run may take (default 30 s); past it rg is killed and the answer is partial. */
  rgTimeoutMs?: number;
  /** How rg and git are started; default: directly from this process. */
  spawner?: Spawner;
  hooks?: WorkspaceHooks;
  /**
   * Intent journal for write transactions (crash consistency). When given, every call waits
   * for `recovery` (the journal's start-up recovery) before touching the workspace; it resolves
   * false when the journal is unavailable and transactions run without it.
   */
  journal?: { journal: EditJournal; recovery: Promise<boolean> };
}

// ---------------------------------------------------------------- read_files

export type ReadFilesRequest = RunnerArguments<"read_files">;
/** One file or range; start_column is the 1-based code-point column of start_line to start at (a mid-line continuation). */
export type ReadFileSpec = ReadFilesRequest["files"][number];

export type LineEnding = "lf" | "crlf" | "mixed" | "none";

export interface ReadTextItem {
  success: true;
  error: null;
  path: string;
  content: string;
  /** Opaque token of the whole file's bytes, independent of the range read. */
  read_revision: string;
  /**
   * Effective 1-based range; an empty range has end_line = start_line - 1. When the content
   * ends mid-line (line_truncated), end_line is that partly returned line.
   */
  start_line: number;
  /** Echoed when the content starts mid-line (request start_column > 1). */
  start_column?: number;
  end_line: number;
  total_lines: number;
  /** The range was not returned whole: continue from next_start_line (and next_start_column). */
  truncated: boolean;
  /** Which budget cut it: raising max_bytes_per_file helps only for the first. */
  truncated_by?: "max_bytes_per_file" | "batch_budget";
  /** Present whenever truncated: where the rest of the requested range starts. */
  next_start_line?: number;
  /** Present when the rest starts mid-line: pass it as start_column with next_start_line. */
  next_start_column?: number;
  /** The content ends inside a line longer than the budget. */
  line_truncated?: true;
  /** A line of stray UTF-8 continuation bytes only, which no column addresses: its rest was skipped. */
  rest_of_line_skipped?: true;
  /** Line-ending style of the whole file. */
  line_ending: LineEnding;
}

export interface ReadBinaryItem {
  success: true;
  error: null;
  path: string;
  binary: true;
  size_bytes: number;
  read_revision: string;
}

export interface ReadFailedItem {
  success: false;
  path: string;
  error: ToolFailure;
}

export type ReadItem = ReadTextItem | ReadBinaryItem | ReadFailedItem;

export interface ReadFilesResult {
  items: ReadItem[];
}

// ---------------------------------------------------------------- list / search

export type ListProjectFilesRequest = RunnerArguments<"list_project_files">;

export interface ListProjectFilesResult {
  /** Sorted; the first max_results of the full sorted listing. */
  paths: string[];
  total: number;
  truncated: boolean;
  /** rg reported errors (e.g. unreadable directories): total counts only what was listed. */
  total_is_lower_bound?: true;
}

export type SearchProjectTextsRequest = RunnerArguments<"search_project_texts">;
/** One query; context_lines are shown before and after each match (output "matches" only). */
export type SearchQuery = SearchProjectTextsRequest["queries"][number];
/** What a query returns: matching lines (default), matching files with counts, or counts only. */
export type SearchOutput = NonNullable<SearchQuery["output"]>;

export interface SearchMatch {
  path: string;
  line: number;
  text: string;
  text_truncated?: true;
  /** Up to context_lines lines before the match, in order (absent when none were asked or exist). */
  before?: string[];
  after?: string[];
}

export interface SearchQuerySuccess {
  success: true;
  error: null;
  /** Sorted by path then line; the first max_results of all matches seen. */
  matches: SearchMatch[];
  /** Number of matching lines; exact unless total_is_lower_bound. */
  total: number;
  truncated: boolean;
  /** Matches may exist that were not seen: the counting ceiling was hit, or rg did not finish (errors, killed). */
  total_is_lower_bound?: true;
  /** rg reported errors for some files (e.g. unreadable); results cover the rest. */
  search_errors?: true;
  /**
   * path → read_revision of a matched file whose listed matches were checked against that exact
   * content (bounded; a path absent here was not proven): a guarded edit can follow at once.
   */
  read_revisions?: Record<string, string>;
}

/** output "files": the matching files by path with their match counts. */
export interface SearchFilesSuccess {
  success: true;
  error: null;
  /** Sorted by path; the first max_results matching files. */
  files: Array<{ path: string; match_count: number }>;
  file_count: number;
  match_count: number;
  truncated: boolean;
  total_is_lower_bound?: true;
  search_errors?: true;
}

/** output "count": how many lines and files match, nothing else. */
export interface SearchCountSuccess {
  success: true;
  error: null;
  match_count: number;
  file_count: number;
  total_is_lower_bound?: true;
  search_errors?: true;
}

export interface SearchQueryFailure {
  success: false;
  error: ToolFailure;
}

export type SearchQueryResult = SearchQuerySuccess | SearchFilesSuccess | SearchCountSuccess | SearchQueryFailure;

export type SearchFileContextRequest = RunnerArguments<"search_file_context">;

export interface SearchFileContextResult {
  path: string;
  /** The revision of exactly the content searched: a guarded edit can follow at once. */
  read_revision: string;
  total_lines: number;
  match_count: number;
  matches: Array<{ line: number; text: string; text_truncated?: true; before?: string[]; after?: string[] }>;
  truncated: boolean;
}

export interface SearchProjectTextsResult {
  results: SearchQueryResult[];
}

// ---------------------------------------------------------------- edit_project_files

export type EditProjectFilesRequest = RunnerArguments<"edit_project_files">;
export type FileChange = EditProjectFilesRequest["changes"][number];
export type FileChangeKind = FileChange["kind"];
export type EditChange = Extract<FileChange, { kind: "edit" }>;
export type CreateChange = Extract<FileChange, { kind: "create" }>;
export type DeleteChange = Extract<FileChange, { kind: "delete" }>;
export type MoveChange = Extract<FileChange, { kind: "move" }>;
export type ReplaceExactEdit = EditChange["edits"][number];
export type LineScope = NonNullable<ReplaceExactEdit["line_scope"]>;

/** 1-based; the end is the last character of the match (inclusive); columns count code points. */
export interface MatchRange {
  start_line: number;
  start_column: number;
  end_line: number;
  end_column: number;
}

export interface ChangeSummary {
  files_changed: number;
  edits_applied: number;
  replacements: number;
  created: number;
  deleted: number;
  moved: number;
}

export interface DryRunEditReport {
  edit_index: number;
  /** Matches observed (inside line_scope when given). */
  match_count: number;
  /** Ranges that would be replaced, bounded. */
  match_ranges: MatchRange[];
  ranges_truncated?: true;
}

export interface DryRunFileReport {
  path: string;
  kind: FileChangeKind;
  destination?: string;
  changed: boolean;
  replacements: number;
  edits?: DryRunEditReport[];
}

export interface EditDryRunResult {
  dry_run: true;
  changed: boolean;
  paths: string[];
  change_summary: ChangeSummary;
  files: DryRunFileReport[];
}

export interface AppliedFileReport {
  path: string;
  kind: FileChangeKind;
  destination?: string;
  changed: boolean;
  /** Revision of the file after the change; absent for delete. */
  read_revision?: string;
  replacements: number;
}

export interface EditAppliedResult {
  dry_run: false;
  execution_state: "completed";
  changed: boolean;
  paths: string[];
  /** Number of changes that altered the disk (no-op edits excluded). */
  applied_count: number;
  change_summary: ChangeSummary;
  files: AppliedFileReport[];
  /** The exact inverse of this call, guarded by the revisions it produced (absent when it has none or is large). */
  undo_changes?: FileChange[];
}

export type EditProjectFilesResult = EditDryRunResult | EditAppliedResult;

// ---------------------------------------------------------------- git review

export type ChangeStatus = "modified" | "added" | "deleted" | "renamed" | "untracked";

export interface FileChangeStat {
  path: string;
  status: ChangeStatus;
  /** Source path of a rename. */
  previous_path?: string;
  /** Present only when known; never 0 in place of unknown. */
  added_lines?: number;
  removed_lines?: number;
  /** The line counts are unknown (binary, or an untracked file not counted): see binary. */
  counts_unknown?: true;
  /** Proven binary. Absent on a file with counts_unknown means not inspected, not "text". */
  binary?: true;
}

/** read_workspace_changes takes no arguments besides the gateway's (project, session_id). */
export type ReadWorkspaceChangesRequest = RunnerArguments<"read_workspace_changes">;

export interface WorkspaceChangesResult {
  changes: FileChangeStat[];
  total_changes: number;
  truncated: boolean;
  branch?: string;
  head?: string;
  /** Write transactions a Runner crash cut off, as start-up recovery finished them (last 24 h, newest first, at most 5). */
  recovered_writes?: RecoveredWrite[];
}

/** One interrupted write transaction as recovery finished it: what an `outcome_unknown` edit turned out to be. */
export interface RecoveredWrite {
  /** The call id the caller's outcome_unknown failure named (evidence.call_id). */
  call_id?: string;
  tool: string;
  outcome: "rolled_back" | "completed";
  /** The transaction's paths (at most 20; paths_truncated when there were more). */
  paths: string[];
  paths_truncated?: true;
  recovered_at: string;
}

export type GitDiffHunksRequest = RunnerArguments<"read_git_diff_hunks">;

export interface TextHunk {
  path: string;
  old_start: number;
  old_lines: number;
  new_start: number;
  new_lines: number;
  /** The `@@ ... @@` line. */
  header: string;
  lines: string[];
  /**
   * True when lines were omitted or cut, here or by the producer (a body shorter than the
   * header's counts, or git's output cut): never treat such a hunk as complete.
   */
  truncated: boolean;
  omitted_lines?: number;
}

export interface BinaryDiff {
  path: string;
  binary: true;
}

export type DiffHunk = TextHunk | BinaryDiff;

export interface GitDiffHunksResult {
  hunks: DiffHunk[];
  /** Hunks in the diff; exact unless total_is_lower_bound. */
  total_hunks: number;
  /** More hunks exist than were returned, or git's output was cut. */
  truncated: boolean;
  /** git's output was cut at its byte cap: later hunks were not seen. */
  total_is_lower_bound?: true;
}

export type GitReviewSummaryRequest = RunnerArguments<"read_git_review_summary">;

export interface GitReviewSummaryResult {
  base: string;
  /** Resolved commit; absent when the base is an unborn HEAD (compared with the empty tree). */
  base_commit?: string;
  files: FileChangeStat[];
  truncated: boolean;
  totals: ReviewTotals;
}

export interface ReviewTotals {
  /** Every changed file, listed or not. */
  files: number;
  /** Sums over the files whose counts are known; lower bounds when lines_lower_bound. */
  added_lines: number;
  removed_lines: number;
  /** Some files' counts are unknown, so the line sums are lower bounds, not exact. */
  lines_lower_bound?: true;
  files_with_unknown_counts?: number;
}

// ---------------------------------------------------------------- import_host_files

export type ImportHostFilesRequest = RunnerArguments<"import_host_files">;
/**
 * One file a Host holds: UTF-8 `content` or binary `content_base64` (exactly one; the gateway
 * refuses both or neither). `overwrite` replaces an existing file (with its current
 * `expected_read_revision`); default: create only.
 */
export type HostFile = ImportHostFilesRequest["files"][number];

export interface ImportedFileReport {
  path: string;
  bytes: number;
  read_revision: string;
  /** Present (true) only when an existing file was replaced. */
  replaced?: true;
}

export interface ImportHostFilesResult {
  files: ImportedFileReport[];
}

// ---------------------------------------------------------------- the engine

/**
 * One workspace's tools. Arguments are canonical (no project selector, ceilings clamped).
 * Whole-call failures reject with ToolFailureError; batch items carry their own `error`.
 */
export interface Workspace {
  /** Batched reads in request order; each item succeeds or fails on its own. */
  readFiles(request: ReadFilesRequest): Promise<ReadFilesResult>;
  /** One `rg --files` run; missing path → `path_not_found`. */
  listProjectFiles(request: ListProjectFilesRequest): Promise<ListProjectFilesResult>;
  /** Independent queries, run concurrently, results in query order; failures per query. */
  searchProjectTexts(request: SearchProjectTextsRequest): Promise<SearchProjectTextsResult>;
  /** The matches in one file with bounded surrounding lines and the file's read_revision. */
  searchFileContext(request: SearchFileContextRequest): Promise<SearchFileContextResult>;
  /** All-or-nothing transaction: full preflight, then atomic per-file apply with rollback. */
  editProjectFiles(request: EditProjectFilesRequest): Promise<EditProjectFilesResult>;
  /** Files a Host holds, written in one edit transaction (same path policy, atomicity, rollback). */
  importHostFiles(request: ImportHostFilesRequest): Promise<ImportHostFilesResult>;
  /** Work tree vs HEAD (staged + unstaged) plus untracked files. */
  readWorkspaceChanges(request: ReadWorkspaceChangesRequest): Promise<WorkspaceChangesResult>;
  /** Bounded hunks of tracked changes vs HEAD; untracked files have no hunks. */
  readGitDiffHunks(request: GitDiffHunksRequest): Promise<GitDiffHunksResult>;
  /** Per-file status and line counts of the work tree against `base` (default HEAD), with totals. */
  readGitReviewSummary(request: GitReviewSummaryRequest): Promise<GitReviewSummaryResult>;
  /** Stable identity of the root directory (real path + device/inode), to detect a swapped directory. */
  rootIdentity(): Promise<string>;
  /** Transactions an earlier process left unfinished and start-up recovery finished (empty without a journal). */
  recoveredTransactions(): Promise<RecoveredTransaction[]>;
}
