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
import type { Workspace, WorkspaceOptions } from "./types.js";

/**
 * Creates the engine for one workspace root. `sensitiveWriteGlobs` replaces the default
 * credential globs (`.git/` stays refused regardless); `hooks` is a test seam into the edit
 * transaction.
 */
export function createWorkspace(options: WorkspaceOptions): Workspace {
  const policy = createPathPolicy(options.root, options.sensitiveWriteGlobs ?? DEFAULT_SENSITIVE_WRITE_GLOBS);
  const spawner = options.spawner ?? createDirectSpawner();
  const rg: RgCommand = { path: options.rgPath ?? bundledRgPath, spawner };
  const hooks = options.hooks;
  return {
    async readFiles(request) {
      return readFiles(await policy.open(), request);
    },
    async listProjectFiles(request) {
      return listProjectFiles(await policy.open(), rg, request);
    },
    async searchProjectTexts(request) {
      return searchProjectTexts(await policy.open(), rg, request);
    },
    async searchFileContext(request) {
      return searchFileContext(await policy.open(), rg, request);
    },
    async editProjectFiles(request) {
      return editProjectFiles({ resolver: await policy.open(), hooks }, request);
    },
    async importHostFiles(request) {
      return importHostFiles({ resolver: await policy.open(), hooks }, request);
    },
    async readWorkspaceChanges() {
      return readWorkspaceChanges(await policy.open(), spawner);
    },
    async readGitDiffHunks(request) {
      return readGitDiffHunks(await policy.open(), spawner, request);
    },
    async readGitReviewSummary(request) {
      return readGitReviewSummary(await policy.open(), spawner, request);
    },
    async rootIdentity() {
      const real = await realRoot(options.root);
      const info = await stat(real, { bigint: true });
      return "sha256:" + createHash("sha256").update(`${real}\0${info.dev}\0${info.ino}`).digest("hex");
    },
  };
}
