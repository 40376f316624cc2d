/**
 * The Runner's workspace engine: pure domain code over one directory, no RPC. Every call opens
 * a fresh view of the root (its real path) so a root swapped between calls is never used with
 * a stale resolution; arguments are already canonical (project selector removed, ceilings
 * clamped). Whole-call failures throw ToolFailureError; batch items carry their own failure.
 */
import { createHash } from "node:crypto";
import { stat } from "node:fs/promises";
import { rgPath as bundledRgPath } from "@vscode/ripgrep";
import { createDirectSpawner } from "../exec/spawner.js";
import { editProjectFiles, importHostFiles } from "./edit-transaction.js";
import { readGitDiffHunks, readGitReviewSummary, readWorkspaceChanges } from "./git-review.js";
import { listProjectFiles } from "./list-files.js";
import { createPathPolicy, DEFAULT_SENSITIVE_WRITE_GLOBS, realRoot } from "./path-policy.js";
import { readFiles } from "./read-files.js";
import type { RgCommand } from "./ripgrep.js";
import { searchProjectTexts } from "./search-texts.js";
import { searchFileContext } from "./search-context.js";
import type { RecoveredWrite, Workspace, WorkspaceOptions } from "./types.js";
import type { RecoveredTransaction } from "./edit-journal.js";

/**
 * Creates the engine for one workspace root. `sensitiveWriteGlobs` replaces the default
 * credential globs (`.git/` stays refused regardless); `hooks` is a test seam into the edit
 * transaction.
 */
export function createWorkspace(options: WorkspaceOptions): Workspace {
  const policy = createPathPolicy(options.root, options.sensitiveWriteGlobs ?? DEFAULT_SENSITIVE_WRITE_GLOBS);
  const spawner = options.spawner ?? createDirectSpawner();
  const rg: RgCommand = { path: options.rgPath ?? bundledRgPath, spawner, ...(options.rgTimeoutMs === undefined ? {} : { timeoutMs: options.rgTimeoutMs }) };
  const hooks = options.hooks;
  // Nothing is read or written until start-up recovery has finished an interrupted transaction.
  const recovery = options.journal?.recovery ?? Promise.resolve(false);
  const open = async () => {
    await recovery;
    return policy.open();
  };
  const journalFor = async () => ((await recovery) ? options.journal?.journal : undefined);
  return {
    async readFiles(request) {
      return readFiles(await open(), request);
    },
    async listProjectFiles(request) {
      return listProjectFiles(await open(), rg, request);
    },
    async searchProjectTexts(request) {
      return searchProjectTexts(await open(), rg, request);
    },
    async searchFileContext(request) {
      return searchFileContext(await policy.open(), rg, request);
    },
    async editProjectFiles(request) {
      return editProjectFiles({ resolver: await open(), hooks, journal: await journalFor() }, request);
    },
    async importHostFiles(request) {
      return importHostFiles({ resolver: await open(), hooks, journal: await journalFor() }, request);
    },
    async readWorkspaceChanges() {
      const changes = await readWorkspaceChanges(await open(), spawner);
      const journal = await journalFor();
      const recent = journal === undefined ? [] : recentRecoveries(await journal.recovered(), Date.now());
      return recent.length === 0 ? changes : { ...changes, recovered_writes: recent };
    },
    async readGitDiffHunks(request) {
      return readGitDiffHunks(await open(), spawner, request);
    },
    async readGitReviewSummary(request) {
      return readGitReviewSummary(await open(), spawner, request);
    },
    async recoveredTransactions() {
      const journal = await journalFor();
      return journal === undefined ? [] : journal.recovered();
    },
    async rootIdentity() {
      const real = await realRoot(options.root);
      const info = await stat(real, { bigint: true });
      return "sha256:" + createHash("sha256").update(`${real}\0${info.dev}\0${info.ino}`).digest("hex");
    },
  };
}

const RECOVERED_WINDOW_MS = 24 * 60 * 60 * 1000;
const RECOVERED_LISTED = 5;
const RECOVERED_PATHS = 20;

/** The recoveries read_workspace_changes reports: the last 24 hours', newest first, at most 5 (paths capped at 20 each). */
export function recentRecoveries(all: readonly RecoveredTransaction[], nowMs: number): RecoveredWrite[] {
  return all
    .filter((t) => nowMs - Date.parse(t.recovered_at) <= RECOVERED_WINDOW_MS)
    .sort((a, b) => b.recovered_at.localeCompare(a.recovered_at))
    .slice(0, RECOVERED_LISTED)
    .map((t) => ({
      ...(t.call_id === undefined ? {} : { call_id: t.call_id }),
      tool: t.tool,
      outcome: t.outcome,
      paths: t.paths.slice(0, RECOVERED_PATHS),
      ...(t.paths.length > RECOVERED_PATHS ? { paths_truncated: true as const } : {}),
      recovered_at: t.recovered_at,
    }));
}
