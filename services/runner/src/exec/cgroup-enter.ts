/**
 * Starting a program inside cgroups: the spawning process (the spawn host, or the Runner when
 * it spawns directly) moves itself into each of the Job's cgroups, forks, and moves itself
 * back. The child is born inside them, so not even its first fork escapes, and no wrapper
 * program runs before the command. Node's spawn forks synchronously on the calling thread, so
 * no other spawn can interleave. Shared by spawner.ts and spawn-host-child.ts; no other imports.
 */
import { readFileSync, writeFileSync } from "node:fs";

interface CgroupMount {
  /** Where the hierarchy is mounted. */
  point: string;
  /** The hierarchy's path shown at `point` (mountinfo field 4). */
  root: string;
  /** "" for cgroup2; else the v1 controllers (and name=…) the hierarchy carries. */
  controllers: string[];
}

let mounts: CgroupMount[] | undefined;

/** The cgroup hierarchies mounted in this process's mount namespace (cached: they do not change under a Runner). */
export function cgroupMounts(): CgroupMount[] {
  if (mounts !== undefined) return mounts;
  const found: CgroupMount[] = [];
  let text = "";
  try {
    text = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return (mounts = found);
  }
  for (const line of text.split("\n")) {
    const [left, right] = line.split(" - ");
    if (left === undefined || right === undefined) continue;
    const fields = left.split(" ");
    const [fstype, , superOptions = ""] = right.split(" ");
    const root = fields[3];
    const point = fields[4];
    if (root === undefined || point === undefined) continue;
    if (fstype === "cgroup2") found.push({ point: unescape(point), root: unescape(root), controllers: [] });
    else if (fstype === "cgroup") {
      found.push({ point: unescape(point), root: unescape(root), controllers: superOptions.split(",").filter((o) => o !== "rw" && o !== "ro") });
    }
  }
  return (mounts = found);
}

function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_m, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** This process's cgroup path per hierarchy: "" for the v2 hierarchy, else each v1 controller name. */
export function ownCgroups(): Map<string, string> {
  const own = new Map<string, string>();
  let text = "";
  try {
    text = readFileSync("/proc/self/cgroup", "utf8");
  } catch {
    return own;
  }
  for (const line of text.split("\n")) {
    const first = line.indexOf(":");
    const second = line.indexOf(":", first + 1);
    if (first < 0 || second < 0) continue;
    const controllers = line.slice(first + 1, second);
    const path = line.slice(second + 1);
    if (controllers === "") own.set("", path);
    else for (const c of controllers.split(",")) own.set(c, path);
  }
  return own;
}

/** The mount a cgroup directory lies in (longest mount point that is a prefix). */
export function mountOf(dir: string): CgroupMount | undefined {
  let best: CgroupMount | undefined;
  for (const m of cgroupMounts()) {
    if ((dir === m.point || dir.startsWith(`${m.point}/`)) && (best === undefined || m.point.length > best.point.length)) best = m;
  }
  return best;
}

/** The directory of this process's own cgroup in the hierarchy mounted as `mount`. */
export function ownDirIn(mount: CgroupMount, own = ownCgroups()): string | undefined {
  const key = mount.controllers.length === 0 ? "" : mount.controllers[0]!;
  const path = own.get(key);
  if (path === undefined) return undefined;
  if (mount.root === "/") return path === "/" ? mount.point : `${mount.point}${path}`;
  if (path !== mount.root && !path.startsWith(`${mount.root}/`)) return undefined;
  return `${mount.point}${path.slice(mount.root.length)}`;
}

function enter(dir: string): void {
  writeFileSync(`${dir}/cgroup.procs`, String(process.pid));
}

/**
 * Runs `spawn` with this process inside every cgroup of `dirs`, then returns it to where it was.
 * Fails (throws, nothing spawned) when a cgroup cannot be entered.
 */
export function spawnWithin<T>(dirs: readonly string[] | undefined, spawn: () => T): T {
  if (dirs === undefined || dirs.length === 0) return spawn();
  const own = ownCgroups();
  const homes: string[] = [];
  for (const dir of dirs) {
    const mount = mountOf(dir);
    const home = mount === undefined ? undefined : ownDirIn(mount, own);
    if (home === undefined) throw Object.assign(new Error(`not a cgroup directory: ${dir}`), { code: "ECGROUP" });
    homes.push(home);
  }
  let entered = 0;
  try {
    for (const dir of dirs) {
      try {
        enter(dir);
      } catch (error) {
        // A start failure (nothing ran): the caller reports spawn_failed.
        throw Object.assign(new Error(`could not start in the Job's cgroup: ${(error as Error).message}`), { code: "ECGROUP" });
      }
      entered++;
    }
    return spawn();
  } finally {
    for (let i = entered - 1; i >= 0; i--) {
      try {
        enter(homes[i]!);
      } catch {
        // Nothing better to do: the next spawn tries again, and a kill of this cgroup would end us.
      }
    }
  }
}
