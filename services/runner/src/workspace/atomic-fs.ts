/**
 * Filesystem primitives for the edit transaction: atomic replace, no-clobber create, and
 * directory creation that can be undone. Temp files live in the target's directory so the
 * final rename never crosses a filesystem.
 */
import { randomBytes } from "node:crypto";
import { link, lstat, mkdir, open, rename, rm, rmdir } from "node:fs/promises";
import path from "node:path";
import { errnoCode } from "./path-policy.js";

/**
 * Replaces `target` with `data` atomically: write a temp file in the same directory, give it
 * the original mode, then rename over. Readers see the old or the new bytes, never a mix.
 */
export async function writeFileAtomic(target: string, data: Uint8Array, mode: number, beforeRename?: () => Promise<void>): Promise<void> {
  const temp = siblingTempName(target, "tmp");
  try {
    const handle = await open(temp, "wx", 0o600);
    try {
      await handle.writeFile(data);
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
  const handle = await open(temp, "wx", 0o666);
  try {
    try {
      await handle.writeFile(data);
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
    } catch (error) {
      if (errnoCode(error) !== "EEXIST") throw error;
    }
  }
  return created;
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
