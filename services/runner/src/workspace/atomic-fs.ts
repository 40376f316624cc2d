/**
 * Filesystem primitives for the edit transaction: atomic replace, no-clobber create, and
 * directory creation that can be undone. Temp files live in the target's directory so the
 * final rename never crosses a filesystem.
 */
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { lchown, link, lstat, mkdir, open, rename, rm, rmdir, stat } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import path from "node:path";
import { errnoCode } from "./path-policy.js";

const AS_ROOT = process.getuid?.() === 0;

/**
 * The owner an entry the Runner writes should have: the file's it replaces, else its
 * directory's. A Runner running as root writes into a workspace that belongs to the user its
 * Jobs run as (exec/job-user.ts); this keeps what it writes theirs. Undefined: keep ours.
 */
async function ownerFor(existing: string | undefined, dir: string): Promise<{ uid: number; gid: number } | undefined> {
  if (!AS_ROOT) return undefined;
  const s = (existing === undefined ? undefined : await stat(existing).catch(() => undefined)) ?? (await stat(dir).catch(() => undefined));
  return s === undefined || (s.uid === 0 && s.gid === 0) ? undefined : { uid: s.uid, gid: s.gid };
}

/** Gives an entry just made (a symlink itself, never its target) the owner its place calls for (see ownerFor). */
export async function inheritOwner(entry: string, replaces?: string): Promise<void> {
  const owner = await ownerFor(replaces, path.dirname(entry));
  if (owner !== undefined) await lchown(entry, owner.uid, owner.gid);
}

async function giveTo(handle: FileHandle, owner: { uid: number; gid: number } | undefined): Promise<void> {
  if (owner !== undefined) await handle.chown(owner.uid, owner.gid);
}

/**
 * Replaces `target` with `data` atomically: write a temp file in the same directory, give it
 * the original mode, then rename over. Readers see the old or the new bytes, never a mix.
 */
export async function writeFileAtomic(target: string, data: Uint8Array, mode: number, beforeRename?: () => Promise<void>): Promise<void> {
  const temp = siblingTempName(target, "tmp");
  try {
    const owner = await ownerFor(target, path.dirname(target));
    const handle = await open(temp, "wx", 0o600);
    try {
      await handle.writeFile(data);
      await giveTo(handle, owner);
      await handle.chmod(mode & 0o7777);
    } finally {
      await handle.close();
    }
    await beforeRename?.();
    await rename(temp, target);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => undefined);
    throw error;
  }
}

/** Creates `target` without ever replacing an existing entry: hard-link a complete temp file into place. */
export async function createExclusive(target: string, data: Uint8Array): Promise<void> {
  const temp = siblingTempName(target, "new");
  const owner = await ownerFor(undefined, path.dirname(target));
  const handle = await open(temp, "wx", 0o666);
  try {
    try {
      await handle.writeFile(data);
      await giveTo(handle, owner);
    } finally {
      await handle.close();
    }
    try {
      await link(temp, target);
    } catch (error) {
      if (errnoCode(error) === "EEXIST") throw error;
      // Filesystems without hard links: check-then-rename (tiny race, still never silent).
      if (await entryExists(target)) throw error;
      await rename(temp, target);
    }
  } finally {
    await rm(temp, { force: true }).catch(() => undefined);
  }
}

/** Creates the missing directories above a new file; returns them in creation order. */
export async function makeParents(dir: string): Promise<string[]> {
  const missing: string[] = [];
  for (let current = dir; !(await entryExists(current)); current = path.dirname(current)) {
    missing.unshift(current);
  }
  const created: string[] = [];
  for (const directory of missing) {
    try {
      await mkdir(directory);
      created.push(directory);
      const owner = await ownerFor(undefined, path.dirname(directory));
      if (owner !== undefined) await chownDirectoryNoFollow(directory, owner);
    } catch (error) {
      if (errnoCode(error) !== "EEXIST") throw error;
    }
  }
  return created;
}

/**
 * Gives a directory just made its owner through a descriptor opened without following a
 * symlink: a Job that swapped the new directory for a symlink (to /etc, say) in between makes
 * the open fail (ELOOP or ENOTDIR) instead of handing the symlink's target over.
 */
async function chownDirectoryNoFollow(directory: string, owner: { uid: number; gid: number }): Promise<void> {
  const handle = await open(directory, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    await handle.chown(owner.uid, owner.gid);
  } finally {
    await handle.close();
  }
}

export async function removeDirs(created: readonly string[]): Promise<void> {
  for (const directory of [...created].reverse()) {
    await rmdir(directory).catch((error: unknown) => {
      // Something else now lives there: leave it rather than fail the rollback.
      if (errnoCode(error) !== "ENOTEMPTY" && errnoCode(error) !== "ENOENT") throw error;
    });
  }
}

export function siblingTempName(target: string, purpose: string): string {
  return path.join(path.dirname(target), `.wc-${purpose}-${randomBytes(6).toString("hex")}`);
}

export async function entryExists(target: string): Promise<boolean> {
  try {
    await lstat(target);
    return true;
  } catch (error) {
    const code = errnoCode(error);
    if (code === "ENOENT" || code === "ENOTDIR") return false;
    throw error;
  }
}
