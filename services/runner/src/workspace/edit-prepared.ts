/**
 * What the edit transaction prepares for each change before anything is written (its target,
 * the bytes it expects and writes, the fingerprint a concurrent writer would change), and the
 * context a transaction runs in.
 */

import { lstat } from "node:fs/promises";
import type { FilePlan } from "./edit-plan.js";
import type { EditJournal } from "./edit-journal.js";
import type { PathResolver, ResolvedPath } from "./path-policy.js";
import type { ReplaceExactEdit, WorkspaceHooks } from "./types.js";

/** Identity of a file at preflight time; a different one at apply time means a concurrent writer. */
export interface Fingerprint {
  ino: number;
  size: number;
  mtimeMs: number;
}

export interface PreparedBase {
  index: number;
  path: string;
}

export interface PreparedEdit extends PreparedBase {
  kind: "edit";
  target: string;
  original: Buffer;
  mode: number;
  fingerprint: Fingerprint;
  revision: string;
  plan: FilePlan;
  edits: readonly ReplaceExactEdit[];
}

export interface PreparedCreate extends PreparedBase {
  kind: "create";
  target: string;
  bytes: Buffer;
}

export interface PreparedDelete extends PreparedBase {
  kind: "delete";
  target: string;
  fingerprint: Fingerprint;
  /** The deleted file's bytes, kept only when small enough to offer their re-creation as undo. */
  original?: Buffer;
}

export interface PreparedMove extends PreparedBase {
  kind: "move";
  destination: string;
  source: string;
  target: string;
  fingerprint: Fingerprint;
  revision: string;
}

/** A whole existing file replaced by new bytes (import_host_files with overwrite). */
export interface PreparedReplace extends PreparedBase {
  kind: "replace";
  target: string;
  original: Buffer;
  mode: number;
  fingerprint: Fingerprint;
  bytes: Buffer;
}

export type Prepared = PreparedEdit | PreparedCreate | PreparedDelete | PreparedMove | PreparedReplace;

export interface EditContext {
  resolver: PathResolver;
  hooks: WorkspaceHooks | undefined;
  /** Intent journal making the transaction crash-consistent (absent: none). */
  journal?: EditJournal | undefined;
}

/** What edit_project_files prepares (every kind but the import-only replace). */
export type EditPrepared = Exclude<Prepared, PreparedReplace>;

export async function entryFingerprint(resolved: ResolvedPath): Promise<Fingerprint | undefined> {
  try {
    return fingerprintOf(await lstat(resolved.entry));
  } catch {
    return undefined;
  }
}

export function fingerprintOf(info: { ino: number; size: number; mtimeMs: number }): Fingerprint {
  return { ino: info.ino, size: info.size, mtimeMs: info.mtimeMs };
}
