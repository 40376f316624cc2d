// Public surface of the Runner workspace engine: the factory first, then its types and limits.
export { createWorkspace } from "./workspace.js";
export { DEFAULT_SENSITIVE_WRITE_GLOBS } from "./path-policy.js";
export { createEditJournal, defaultJournalDir } from "./edit-journal.js";
export type { EditJournal, RecoveredTransaction } from "./edit-journal.js";
export { DEFAULT_MAX_BYTES_PER_FILE, MAX_BATCH_CONTENT_BYTES, MAX_READ_FILE_BYTES } from "./read-files.js";
export { DEFAULT_MAX_LIST_RESULTS } from "./list-files.js";
export { DEFAULT_MAX_SEARCH_RESULTS, MAX_MATCH_TEXT_CHARS, SEARCH_COUNT_CEILING } from "./search-texts.js";
export { DEFAULT_FILE_CONTEXT_LINES, DEFAULT_MAX_FILE_MATCHES, MAX_CONTEXT_FILE_BYTES, MAX_CONTEXT_LINES } from "./search-context.js";
export { MAX_EXPECTED_MATCH_COUNT, MAX_LISTED_MATCHES } from "./edit-plan.js";
export { DEFAULT_CONTEXT_LINES, DEFAULT_MAX_HUNKS, MAX_HUNK_LINES, MAX_LISTED_CHANGES } from "./git-review.js";
export type {
  AppliedFileReport,
  BinaryDiff,
  ChangeStatus,
  ChangeSummary,
  CreateChange,
  DeleteChange,
  DiffHunk,
  DryRunEditReport,
  DryRunFileReport,
  EditAppliedResult,
  EditChange,
  EditDryRunResult,
  EditProjectFilesRequest,
  EditProjectFilesResult,
  FileChange,
  FileChangeKind,
  FileChangeStat,
  GitDiffHunksRequest,
  GitDiffHunksResult,
  GitReviewSummaryRequest,
  GitReviewSummaryResult,
  LineEnding,
  LineScope,
  ListProjectFilesRequest,
  ListProjectFilesResult,
  MatchRange,
  MoveChange,
  ReadBinaryItem,
  ReadFailedItem,
  ReadFileSpec,
  ReadFilesRequest,
  ReadFilesResult,
  ReadItem,
  ReadTextItem,
  ReadWorkspaceChangesRequest,
  ReplaceExactEdit,
  ReviewTotals,
  SearchMatch,
  SearchProjectTextsRequest,
  SearchProjectTextsResult,
  SearchQuery,
  SearchQueryFailure,
  SearchQueryResult,
  SearchQuerySuccess,
  TextHunk,
  Workspace,
  WorkspaceChangesResult,
  WorkspaceHooks,
  WorkspaceOptions,
} from "./types.js";
