/**
 * The user Jobs run as. A Runner running as root starts every program (Jobs, git, rg) as an
 * unprivileged user instead, so nothing a Job runs can read what only the Runner may read (its
 * credential file, a tokens file) or signal and trace the Runner:
 *
 * - `auto` (the default): as root, the owner of the workspace root when that is not root (a
 *   developer's checkout keeps its owner), else uid/gid 65532, to which a root-owned workspace
 *   is handed over at start; not root: the Runner's own user (nothing to switch to).
 * - `runner`: the Runner's own user (Jobs can then read whatever the Runner can).
 * - `<uid>[:<gid>]`: that user (gid defaults to the uid); needs root.
 *
 * Files the Runner writes into the workspace afterwards get the owner of the file they replace
 * or of the directory they are created in (atomic-fs.ts), so Jobs can keep writing them.
 */
import { createHash } from "node:crypto";
import { chmodSync, chownSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, statSync } from "node:fs";
import { spawnSync } from "node:child_process";
import os from "node:os";
import path from "node:path";
import type { SpawnedChild, SpawnOptions, Spawner } from "./spawner.js";

export const DEFAULT_JOB_UID = 65532;

export interface JobUser {
  uid: number;
  gid: number;
  /** A home directory of the Job user's own (the Runner's home is not theirs to read). */
  home: string;
}

/** Parses WEBCODEX_RUNNER_JOB_USER; undefined when valid, else the problem. */
export function jobUserSettingProblem(value: string): string | undefined {
  if (value === "auto" || value === "runner") return undefined;
  const m = /^(\d{1,10})(?::(\d{1,10}))?$/.exec(value);
  if (m === null) return `must be auto, runner or <uid>[:<gid>], got ${JSON.stringify(value)}`;
  if (Number(m[1]) === 0 || Number(m[2] ?? m[1]) === 0) return "must not name root (uid or gid 0)";
  return undefined;
}

/** Hands a tree to the Job user: every entry, symlinks themselves, never followed. */
function handOver(root: string, uid: number, gid: number): number {
  let changed = 0;
  const stack = [root];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      try {
        lchownSync(full, uid, gid);
        changed++;
      } catch {
        // Vanished meanwhile: nothing to hand over.
      }
      if (entry.isDirectory()) stack.push(full);
    }
  }
  chownSync(root, uid, gid);
  return changed + 1;
}

/** True when `user` can reach `dir` (search permission on every directory on the way). */
function reachable(dir: string, user: { uid: number; gid: number }): boolean {
  const r = spawnSync("/bin/sh", ["-c", 'cd -- "$1"', "sh", dir], {
    uid: user.uid,
    gid: user.gid,
    stdio: "ignore",
    env: { PATH: "/usr/bin:/bin" },
    timeout: 10_000,
  });
  return r.error === undefined && r.status === 0;
}

/**
 * Decides the Job user for a workspace (see the module comment) and prepares it: hands a
 * root-owned workspace over and makes the Job user's home. Undefined: Jobs run as the Runner
 * (`auto` also ends there, with `unreachable` set, when the Job user could not reach the
 * workspace because a directory above it is closed to others).
 */
export function resolveJobUser(setting: string, root: string, onUnreachable?: () => void): (JobUser & { handedOver: number }) | undefined {
  const asRoot = process.getuid?.() === 0;
  if (setting === "runner") return undefined;
  if (!asRoot) {
    if (setting === "auto") return undefined;
    throw new Error(`WEBCODEX_RUNNER_JOB_USER=${setting} needs a Runner running as root`);
  }
  const owner = statSync(root);
  let uid: number;
  let gid: number;
  if (setting === "auto") {
    [uid, gid] = owner.uid !== 0 ? [owner.uid, owner.gid] : [DEFAULT_JOB_UID, DEFAULT_JOB_UID];
  } else {
    const [u, g] = setting.split(":");
    uid = Number(u);
    gid = Number(g ?? u);
  }
  if (!reachable(path.dirname(root), { uid, gid })) {
    if (setting !== "auto") throw new Error(`WEBCODEX_RUNNER_JOB_USER=${setting}: that user cannot reach ${path.dirname(root)}`);
    onUnreachable?.();
    return undefined;
  }
  const handedOver = owner.uid === uid && owner.gid === gid ? 0 : handOver(root, uid, gid);
  return { uid, gid, home: privateHome({ uid, gid }), handedOver };
}

/** A fresh `0700` home directory owned by `user` (the Runner's own user when undefined). */
export function privateHome(user: { uid: number; gid: number } | undefined): string {
  const home = mkdtempSync(path.join(os.tmpdir(), "webcodex-job-home-"));
  if (user !== undefined) chownSync(home, user.uid, user.gid);
  chmodSync(home, 0o700);
  return home;
}

/**
 * The Job user when every program runs in the sandbox (sandbox.ts), which mounts the workspace
 * itself, so nothing is handed over and no directory above the workspace needs opening: as
 * root, the owner of the workspace root (a developer's checkout keeps its owner; a workspace
 * the platform creates is owned by its project's uid from the start, see projectUid), or the
 * configured `<uid>[:<gid>]`; a root-owned workspace under `auto` runs its Jobs as root inside
 * the sandbox (no capabilities, host secrets masked). Undefined: the Runner's own user.
 */
export function sandboxedJobUser(setting: string, root: string): (JobUser & { handedOver: number }) | undefined {
  const asRoot = process.getuid?.() === 0;
  if (setting === "runner") return undefined;
  if (!asRoot) {
    if (setting === "auto") return undefined;
    throw new Error(`WEBCODEX_RUNNER_JOB_USER=${setting} needs a Runner running as root`);
  }
  let uid: number;
  let gid: number;
  if (setting === "auto") {
    const owner = statSync(root);
    if (owner.uid === 0) return undefined;
    [uid, gid] = [owner.uid, owner.gid];
  } else {
    const [u, g] = setting.split(":");
    uid = Number(u);
    gid = Number(g ?? u);
  }
  return { uid, gid, home: privateHome({ uid, gid }), handedOver: 0 };
}

/** First uid of the range project uids are drawn from (above the usual subordinate-id ranges). */
export const PROJECT_UID_BASE = 200_000_000;
const PROJECT_UID_SPAN = 1_000_000_000;

/**
 * The uid (and gid) a workspace the platform creates belongs to: derived from the workspace's
 * directory name, and distinct from the owner of every other entry of `parents` (default: the
 * workspace's own parent; `webcodex up` keeps one directory per tenant and passes them all),
 * so no two projects under one data directory share a uid, across tenants too. The workspace
 * directory itself records it (its owner), so the choice survives restarts.
 */
export function projectUid(dir: string, parents: readonly string[] = [path.dirname(dir)]): number {
  const taken = new Set<number>();
  for (const parent of parents) {
    try {
      for (const e of readdirSync(parent)) {
        const entry = path.join(parent, e);
        if (path.resolve(entry) === path.resolve(dir)) continue;
        try {
          taken.add(lstatSync(entry).uid);
        } catch {
          // Gone meanwhile.
        }
      }
    } catch {
      // No parent yet: nothing taken.
    }
  }
  const digest = createHash("sha256").update(path.basename(dir)).digest();
  let uid = PROJECT_UID_BASE + (digest.readUInt32BE(0) % PROJECT_UID_SPAN);
  while (taken.has(uid)) uid = PROJECT_UID_BASE + ((uid - PROJECT_UID_BASE + 1) % PROJECT_UID_SPAN);
  return uid;
}

/** The owner a workspace the platform creates at `dir` gets: its project's uid as root, else none (the Runner's user). */
export function projectOwner(dir: string, parents?: readonly string[]): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = projectUid(dir, parents);
  return { uid, gid: uid };
}

/**
 * Creates an empty workspace directory owned by its project's uid (as root; otherwise by the
 * Runner's user). One fresh directory changes owner, before anything runs in it: no tree walk.
 * `parents`: see projectUid.
 */
export function createOwnedWorkspaceDir(dir: string, parents?: readonly string[]): { uid: number; gid: number } | undefined {
  mkdirSync(path.dirname(dir), { recursive: true, mode: 0o700 });
  mkdirSync(dir, { mode: 0o755 });
  const owner = projectOwner(dir, parents);
  if (owner !== undefined) chownSync(dir, owner.uid, owner.gid);
  return owner;
}

/**
 * Who a clone into `root` at a Runner's start must run as: a root Runner whose workspace the
 * platform made owned by a project uid (createOwnedWorkspaceDir) clones as that uid, so every
 * file is born with the right owner; otherwise the Runner's own user (undefined).
 */
export function cloneOwnerOf(root: string): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const s = statSync(root);
  return s.uid === 0 ? undefined : { uid: s.uid, gid: s.gid };
}

/** True when the file can be read by the Job user through its "other" or group bits. */
export function readableBy(file: string, user: { uid: number; gid: number }): boolean {
  const s = lstatSync(file);
  if (s.uid === user.uid) return (s.mode & 0o400) !== 0;
  if (s.gid === user.gid) return (s.mode & 0o040) !== 0;
  return (s.mode & 0o004) !== 0;
}

/**
 * Every program started through this spawner runs as the Job user, with the Job user's home
 * in place of the Runner's.
 */
export function spawnAs(spawner: Spawner, user: JobUser, defaultEnv: () => Record<string, string>): Spawner {
  const runnerHome = os.homedir();
  return {
    spawn(program: string, args: readonly string[], options: SpawnOptions): SpawnedChild {
      const env = { ...(options.env ?? defaultEnv()) };
      if (env["HOME"] === undefined || env["HOME"] === runnerHome) env["HOME"] = user.home;
      return spawner.spawn(program, args, { ...options, env, uid: user.uid, gid: user.gid });
    },
    close: () => spawner.close(),
  };
}
