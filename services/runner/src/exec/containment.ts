/**
 * Job containment: a cgroup per Job where the machine allows it (a process limit, a memory
 * limit, and one kill that reaches every process of the Job however it detached), else the
 * process-tree tracking of process-group.ts (the Job's group plus every process carrying its
 * tag). Detected once per Runner:
 *
 * - `cgroup_v2`: a writable cgroup v2 subtree whose parent grants the pids and memory
 *   controllers (a pure v2 machine, or a container given a delegated subtree). Processes of the
 *   Runner's own cgroup move into a `webcodex-runner` leaf so the controllers can be enabled.
 * - `cgroup_v1`: writable v1 `pids` and `memory` hierarchies (v1 or hybrid machines); the kill
 *   uses a v2 cgroup when the unified hierarchy offers `cgroup.kill`, else every process listed
 *   in the pids cgroup is killed until none is left.
 * - `process_tree`: neither; no per-Job limit beyond the Runner's own.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { cgroupMounts, ownCgroups, ownDirIn } from "./cgroup-enter.js";

export type ContainmentMode = "cgroup_v2" | "cgroup_v1" | "process_tree";

export interface ContainmentConfig {
  /** "auto" detects; "process_tree" forces the fallback (WEBCODEX_RUNNER_CONTAINMENT). */
  mode: "auto" | "process_tree";
  /** Most processes (tasks) a Job may have at once (`pids.max`). */
  pidsMax: number;
  /** Most memory a Job's processes may use together, in bytes (`memory.max`). */
  memoryMaxBytes: number;
}

export const DEFAULT_CONTAINMENT: Readonly<ContainmentConfig> = Object.freeze({
  mode: "auto",
  pidsMax: 512,
  memoryMaxBytes: 2 * 1024 ** 3,
});

/** The limits a Job ran into (present only when one was hit), with their values. */
export interface LimitExceeded {
  pids_max?: number;
  memory_max_bytes?: number;
}

/** One Job's cgroups. */
export interface JobCgroup {
  /** Directories the Job's first process is started in (see cgroup-enter.ts). */
  readonly dirs: readonly string[];
  /** Live pids in the Job's cgroup (for SIGTERM before the kill). */
  pids(): number[];
  /** Kills every process of the Job at once; resolves when none is left (or after `deadlineMs`). */
  kill(deadlineMs?: number): Promise<void>;
  /** The limits the Job ran into so far (read before the cgroup is removed, kept after). */
  exceeded(): LimitExceeded | undefined;
  /** Removes the (empty) cgroups; a no-op once done. */
  remove(): void;
}

export interface Containment {
  readonly mode: ContainmentMode;
  /** Why a cgroup mode was not available (process_tree only). */
  readonly fallbackReason?: string;
  readonly pidsMax?: number;
  readonly memoryMaxBytes?: number;
  /** A Job's cgroups, created with their limits; undefined in process_tree mode (or when creation fails). */
  create(jobId: string): JobCgroup | undefined;
}

const PREFIX = "webcodex-";
const POLL_MS = 20;

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

function counter(text: string | undefined, key: string): number {
  const m = text?.match(new RegExp(`(?:^|\\n)${key} (\\d+)`));
  return m === undefined || m === null ? 0 : Number(m[1]);
}

function procsOf(dir: string): number[] {
  const text = readText(`${dir}/cgroup.procs`) ?? "";
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map(Number)
    .filter((n) => n > 0);
}

function killPids(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Gone already.
    }
  }
}

function tryRmdir(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT";
  }
}

/** A probe that a directory can hold a child cgroup: create and remove one. */
function canCreateChild(parent: string): boolean {
  const probe = `${parent}/${PREFIX}probe-${process.pid}`;
  try {
    mkdirSync(probe);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") return false;
  }
  return tryRmdir(probe);
}

interface Layout {
  mode: "cgroup_v2" | "cgroup_v1";
  /** Parent directories Job cgroups are made in; the first holds the pids limit. */
  pidsParent: string;
  memoryParent: string;
  /** A v2 parent whose children offer cgroup.kill (may equal pidsParent); undefined: kill by listing. */
  killParent: string | undefined;
}

/** Enables pids and memory for the children of `dir`, moving its processes into a leaf first when needed. */
function delegateV2(dir: string): boolean {
  const enabled = () => (readText(`${dir}/cgroup.subtree_control`) ?? "").split(/\s+/);
  const has = () => enabled().includes("pids") && enabled().includes("memory");
  if (has()) return true;
  const tryEnable = () => {
    try {
      writeFileSync(`${dir}/cgroup.subtree_control`, "+pids +memory");
      return true;
    } catch {
      return false;
    }
  };
  if (tryEnable()) return has();
  // "No internal processes": move the cgroup's processes (this Runner among them) into a leaf.
  const leaf = `${dir}/${PREFIX}runner`;
  try {
    if (!existsSync(leaf)) mkdirSync(leaf);
    for (let round = 0; round < 10; round++) {
      const pids = procsOf(dir);
      if (pids.length === 0) break;
      for (const pid of pids) {
        try {
          appendFileSync(`${leaf}/cgroup.procs`, String(pid));
        } catch {
          // Exited meanwhile, or a kernel thread: retried next round.
        }
      }
    }
  } catch {
    return false;
  }
  return tryEnable() && has();
}

function detectV2(): Layout | undefined {
  const v2 = cgroupMounts().find((m) => m.controllers.length === 0);
  if (v2 === undefined) return undefined;
  const dir = ownDirIn(v2);
  if (dir === undefined) return undefined;
  const available = (readText(`${dir}/cgroup.controllers`) ?? "").split(/\s+/);
  if (!available.includes("pids") || !available.includes("memory")) return undefined;
  if (!canCreateChild(dir) || !delegateV2(dir)) return undefined;
  return { mode: "cgroup_v2", pidsParent: dir, memoryParent: dir, killParent: dir };
}

function detectV1(): Layout | undefined {
  const mounts = cgroupMounts();
  const own = ownCgroups();
  const pids = mounts.find((m) => m.controllers.includes("pids"));
  const memory = mounts.find((m) => m.controllers.includes("memory"));
  if (pids === undefined || memory === undefined) return undefined;
  const pidsParent = ownDirIn(pids, own);
  const memoryParent = ownDirIn(memory, own);
  if (pidsParent === undefined || memoryParent === undefined) return undefined;
  if (!canCreateChild(pidsParent) || !canCreateChild(memoryParent)) return undefined;
  const v2 = mounts.find((m) => m.controllers.length === 0);
  let killParent: string | undefined;
  const v2Dir = v2 === undefined ? undefined : ownDirIn(v2, own);
  if (v2Dir !== undefined && canCreateChild(v2Dir)) {
    const probe = `${v2Dir}/${PREFIX}probe-${process.pid}`;
    try {
      mkdirSync(probe);
      if (existsSync(`${probe}/cgroup.kill`)) killParent = v2Dir;
    } catch {
      // No v2 kill; listing it is.
    } finally {
      tryRmdir(probe);
    }
  }
  return { mode: "cgroup_v1", pidsParent, memoryParent, killParent };
}

class CgroupJob implements JobCgroup {
  readonly dirs: string[];
  readonly #layout: Layout;
  readonly #pidsDir: string;
  readonly #memoryDir: string;
  readonly #killDir: string | undefined;
  readonly #config: ContainmentConfig;
  #exceeded: LimitExceeded | undefined;
  #removed = false;

  constructor(layout: Layout, config: ContainmentConfig, name: string) {
    this.#layout = layout;
    this.#config = config;
    this.#pidsDir = `${layout.pidsParent}/${name}`;
    this.#memoryDir = `${layout.memoryParent}/${name}`;
    this.#killDir = layout.killParent === undefined ? undefined : `${layout.killParent}/${name}`;
    this.dirs = [...new Set([this.#pidsDir, this.#memoryDir, ...(this.#killDir === undefined ? [] : [this.#killDir])])];
    const made: string[] = [];
    try {
      for (const dir of this.dirs) {
        mkdirSync(dir);
        made.push(dir);
      }
      writeFileSync(`${this.#pidsDir}/pids.max`, String(config.pidsMax));
      if (layout.mode === "cgroup_v2") {
        writeFileSync(`${this.#memoryDir}/memory.max`, String(config.memoryMaxBytes));
        if (existsSync(`${this.#memoryDir}/memory.swap.max`)) writeFileSync(`${this.#memoryDir}/memory.swap.max`, "0");
      } else {
        writeFileSync(`${this.#memoryDir}/memory.limit_in_bytes`, String(config.memoryMaxBytes));
        // Memory plus swap, so a hog cannot page its way past the limit.
        if (existsSync(`${this.#memoryDir}/memory.memsw.limit_in_bytes`)) {
          try {
            writeFileSync(`${this.#memoryDir}/memory.memsw.limit_in_bytes`, String(config.memoryMaxBytes));
          } catch {
            // Swap accounting off: the memory limit alone holds.
          }
        }
      }
    } catch (error) {
      for (const dir of made.reverse()) tryRmdir(dir);
      throw error;
    }
  }

  pids(): number[] {
    return procsOf(this.#pidsDir);
  }

  async kill(deadlineMs = 5_000): Promise<void> {
    const end = Date.now() + deadlineMs;
    for (;;) {
      let left = this.pids();
      if (this.#killDir !== undefined) {
        try {
          writeFileSync(`${this.#killDir}/cgroup.kill`, "1");
        } catch {
          // Removed already, or no kill file: listing below.
        }
        left = this.pids();
      }
      if (left.length === 0) return;
      // pids.max bounds what a fork bomb can add between a listing and its kill.
      killPids(left, "SIGKILL");
      if (Date.now() >= end) return;
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  exceeded(): LimitExceeded | undefined {
    if (this.#removed) return this.#exceeded;
    const out: LimitExceeded = {};
    if (counter(readText(`${this.#pidsDir}/pids.events`), "max") > 0) out.pids_max = this.#config.pidsMax;
    const oomKills =
      this.#layout.mode === "cgroup_v2"
        ? counter(readText(`${this.#memoryDir}/memory.events`), "oom_kill")
        : counter(readText(`${this.#memoryDir}/memory.oom_control`), "oom_kill");
    if (oomKills > 0) out.memory_max_bytes = this.#config.memoryMaxBytes;
    this.#exceeded = Object.keys(out).length === 0 ? undefined : out;
    return this.#exceeded;
  }

  remove(): void {
    if (this.#removed) return;
    this.exceeded();
    let all = true;
    for (const dir of [...this.dirs].reverse()) all = tryRmdir(dir) && all;
    this.#removed = all;
  }
}

class DetectedContainment implements Containment {
  readonly mode: ContainmentMode;
  readonly fallbackReason?: string;
  readonly pidsMax?: number;
  readonly memoryMaxBytes?: number;
  readonly #layout: Layout | undefined;
  readonly #config: ContainmentConfig;

  constructor(config: ContainmentConfig, layout: Layout | undefined, fallbackReason: string | undefined) {
    this.#config = config;
    this.#layout = layout;
    this.mode = layout?.mode ?? "process_tree";
    if (layout !== undefined) {
      this.pidsMax = config.pidsMax;
      this.memoryMaxBytes = config.memoryMaxBytes;
    } else if (fallbackReason !== undefined) this.fallbackReason = fallbackReason;
  }

  create(jobId: string): JobCgroup | undefined {
    if (this.#layout === undefined) return undefined;
    return new CgroupJob(this.#layout, this.#config, `${PREFIX}${jobId}`);
  }
}

/** Detects what this machine allows, once; `config.mode: "process_tree"` skips detection. */
export function detectContainment(config: Partial<ContainmentConfig> = {}): Containment {
  const full: ContainmentConfig = { ...DEFAULT_CONTAINMENT, ...config };
  if (full.mode === "process_tree") return new DetectedContainment(full, undefined, "configured");
  if (process.platform !== "linux") return new DetectedContainment(full, undefined, "not_linux");
  const layout = detectV2() ?? detectV1();
  return new DetectedContainment(full, layout, layout === undefined ? "no_writable_cgroup" : undefined);
}

/** The fallback alone (tests and embedders that start Jobs without detection). */
export function processTreeContainment(): Containment {
  return new DetectedContainment({ ...DEFAULT_CONTAINMENT, mode: "process_tree" }, undefined, "configured");
}
