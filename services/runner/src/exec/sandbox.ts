/**
 * The Job sandbox: every program the Runner starts (Jobs, validation steps, git, rg, clones)
 * runs under bubblewrap (`bwrap`, Debian package `bubblewrap`) in namespaces of its own:
 *
 * - a mount namespace holding only the system directories (read-only), the project's workspace
 *   (read-write, at its own path), a private `/tmp` and a private home: nothing of the Runner
 *   (its state directory and journal, tokens, database, other workspaces) exists in it;
 * - its own pid namespace with a fresh `/proc` (no other process is visible or signalable), and
 *   its own IPC and UTS namespaces; the sandbox dies with the process that started it;
 * - the Job's own uid (see job-user.ts), no capabilities (bounding set emptied), no_new_privs.
 *
 * A Runner running as root starts `bwrap` as root (so it can mount a workspace whose parent
 * directories are closed to the Job user) and drops to the Job user inside with `setpriv`
 * before the program runs. The environment bwrap and setpriv themselves see is stripped of
 * the variables the dynamic loader honours (LD_PRELOAD, ...); those are handed to the program
 * only after the drop. A Runner not running as root starts `bwrap` as itself in a user
 * namespace of its own (needs unprivileged user namespaces).
 *
 * `detectSandbox` finds out once per process whether a sandbox can be made here, by making one.
 */
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, readlinkSync, realpathSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { SpawnedChild, SpawnOptions, Spawner } from "./spawner.js";

/** WEBCODEX_RUNNER_SANDBOX: `auto` (use it when it can be made), `required` (refuse to start without), `off`. */
export type SandboxSetting = "auto" | "required" | "off";

export interface SandboxSupport {
  available: boolean;
  /** `root`: bwrap runs as root and drops to the Job user; `userns`: bwrap runs as the Runner's user in a user namespace. */
  mode?: "root" | "userns";
  bwrap?: string;
  /** Why no sandbox can be made (when not available). */
  problem?: string;
}

const SETPRIV = "/usr/bin/setpriv";
const ENV = "/usr/bin/env";
/** Where bwrap is looked for when WEBCODEX_RUNNER_BWRAP is not set. */
export const DEFAULT_BWRAP = "/usr/bin/bwrap";

/** Variables the glibc loader and libc honour in a privileged process: never seen by bwrap or setpriv running as root. */
const LOADER_ENV =
  /^(LD_.*|GCONV_PATH|GETCONF_DIR|GLIBC_TUNABLES|HOSTALIASES|LOCALDOMAIN|LOCPATH|MALLOC_.*|NIS_PATH|NLSPATH|RESOLV_HOST_CONF|RES_OPTIONS|TMPDIR|TZDIR)$/;

/** Host secrets masked even though /etc is visible (for a Job that runs as root because root owns its workspace). */
const MASKED_FILES = ["/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers"];
const MASKED_DIRS = ["/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d"];
const SYSTEM_DIRS = ["/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

export interface SandboxPlan {
  /** The workspace: the only host directory a Job can write (mounted at its own path). */
  workspace: string;
  /** The Job's identity inside; a `root` mode sandbox drops to it. Default: the Runner's own. */
  user?: { uid: number; gid: number };
  /** The Job's private home (a host directory owned by the Job user), mounted at its own path. */
  home?: string;
  /** Further host paths visible read-only (a bundled rg binary's directory). */
  readOnly?: readonly string[];
  /** Share the host's network (default true: package installs and clones need it). */
  network?: boolean;
}

let cached: Map<string, SandboxSupport> | undefined;

function systemMounts(): string[] {
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    let st;
    try {
      st = lstatSync(dir);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) args.push("--symlink", readlinkSync(dir), dir);
    else if (st.isDirectory()) args.push("--ro-bind", dir, dir);
  }
  for (const f of MASKED_FILES) if (existsSync(f)) args.push("--ro-bind", "/dev/null", f);
  for (const d of MASKED_DIRS) if (existsSync(d)) args.push("--tmpfs", d, "--remount-ro", d);
  return args;
}

/**
 * `--dir` for each directory above `target` that exists only in the sandbox (not under a
 * system directory): searchable by the Job user, whatever the host's directory allows (bwrap
 * would otherwise copy a closed host directory's mode).
 */
function openParents(target: string): string[] {
  const args: string[] = [];
  const parts = path
    .resolve(target)
    .split("/")
    .filter((p) => p !== "");
  for (let i = 1; i < parts.length; i++) {
    const dir = `/${parts.slice(0, i).join("/")}`;
    if (dir === "/tmp" || SYSTEM_DIRS.some((s) => dir === s || dir.startsWith(`${s}/`))) continue;
    args.push("--perms", "0755", "--dir", dir);
  }
  return args;
}

/** The mounts shared by every sandbox of this process (system directories do not move). */
let systemArgs: string[] | undefined;

function bwrapPrefix(support: SandboxSupport, plan: SandboxPlan, cwd: string): string[] {
  systemArgs ??= systemMounts();
  const args = [...systemArgs, "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"];
  for (const p of plan.readOnly ?? []) args.push(...openParents(p), "--ro-bind", p, p);
  const real = realpathSync(plan.workspace);
  const bind = (source: string, target: string) => args.push(...openParents(target), "--bind", source, target);
  bind(real, real);
  if (plan.workspace !== real) bind(real, plan.workspace);
  if (plan.home !== undefined) bind(plan.home, plan.home);
  args.push("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent");
  if (plan.network === false) args.push("--unshare-net");
  if (support.mode === "userns") args.push("--unshare-user", "--cap-drop", "ALL");
  args.push("--chdir", cwd);
  return args;
}

/**
 * The argv (program first) and environment that run `program` in the sandbox, and the user
 * the sandbox itself must be started as (none: the Runner's own).
 */
export function sandboxCommand(
  support: SandboxSupport,
  plan: SandboxPlan,
  program: string,
  args: readonly string[],
  cwd: string,
  env: Record<string, string>,
): { program: string; args: string[]; env: Record<string, string> } {
  if (!support.available || support.bwrap === undefined) throw new Error(`no sandbox: ${support.problem ?? "unavailable"}`);
  const prefix = bwrapPrefix(support, plan, cwd);
  if (support.mode === "userns") return { program: support.bwrap, args: [...prefix, "--", program, ...args], env };
  const user = plan.user ?? { uid: 0, gid: 0 };
  const outer: Record<string, string> = {};
  const loader: string[] = [];
  for (const [k, v] of Object.entries(env)) {
    if (LOADER_ENV.test(k)) loader.push(`${k}=${v}`);
    else outer[k] = v;
  }
  const drop = [SETPRIV, `--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"];
  const inner = loader.length === 0 ? [program, ...args] : [ENV, ...loader, program, ...args];
  return { program: support.bwrap, args: [...prefix, "--", ...drop, ...inner], env: outer };
}

/**
 * Whether a sandbox can be made here: bwrap is found and runs `true` in one (as root: with the
 * drop to an unprivileged user; otherwise: in a user namespace). Probed once per bwrap path.
 */
export function detectSandbox(bwrap: string = process.env["WEBCODEX_RUNNER_BWRAP"] ?? DEFAULT_BWRAP): SandboxSupport {
  cached ??= new Map();
  const known = cached.get(bwrap);
  if (known !== undefined) return known;
  const support = probe(bwrap);
  cached.set(bwrap, support);
  return support;
}

function probe(bwrap: string): SandboxSupport {
  if (process.platform !== "linux") return { available: false, problem: "the sandbox needs Linux (bubblewrap)" };
  if (!path.isAbsolute(bwrap) || !existsSync(bwrap)) return { available: false, problem: `bubblewrap not found at ${bwrap} (apt-get install bubblewrap)` };
  const asRoot = process.getuid?.() === 0;
  if (asRoot && !existsSync(SETPRIV)) return { available: false, problem: `${SETPRIV} not found (Debian package util-linux)` };
  const support: SandboxSupport = { available: true, mode: asRoot ? "root" : "userns", bwrap };
  const dir = realpathSync(os.tmpdir());
  const plan: SandboxPlan = { workspace: dir, ...(asRoot ? { user: { uid: 65534, gid: 65534 } } : {}) };
  const cmd = sandboxCommand(support, plan, "/bin/sh", ["-c", "exit 0"], dir, { PATH: "/usr/bin:/bin" });
  const r = spawnSync(cmd.program, cmd.args, { env: cmd.env, stdio: ["ignore", "ignore", "pipe"], timeout: 10_000, encoding: "utf8" });
  if (r.error !== undefined || r.status !== 0) {
    const why = (r.error?.message ?? r.stderr ?? "").trim().split("\n")[0]?.slice(0, 200) ?? "";
    return {
      available: false,
      problem: asRoot
        ? `bubblewrap could not make a sandbox: ${why}`
        : `bubblewrap could not make a sandbox without root (unprivileged user namespaces disabled?): ${why}`,
    };
  }
  return support;
}

/** Forgets probed results (tests that change WEBCODEX_RUNNER_BWRAP). */
export function resetSandboxDetection(): void {
  cached = undefined;
}

const SIGNAL_NAMES = new Map<number, NodeJS.Signals>(Object.entries(os.constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));

/**
 * bwrap exits 128+n when the program it ran was killed by signal n: reported as that signal,
 * as it would be without the sandbox (a program exiting with such a code itself reads the same).
 */
function withSignalExits(child: SpawnedChild): SpawnedChild {
  const translate = (code: number | null, signal: NodeJS.Signals | null): [number | null, NodeJS.Signals | null] => {
    if (signal === null && code !== null && code > 128) {
      const name = SIGNAL_NAMES.get(code - 128);
      if (name !== undefined) return [null, name];
    }
    return [code, signal];
  };
  const wrap = (event: string, listener: (...a: never[]) => void) =>
    event === "exit" || event === "close"
      ? (code: number | null, signal: NodeJS.Signals | null) => (listener as (c: number | null, s: NodeJS.Signals | null) => void)(...translate(code, signal))
      : listener;
  const proxy: SpawnedChild = {
    get pid() {
      return child.pid;
    },
    get stdout() {
      return child.stdout;
    },
    get stderr() {
      return child.stderr;
    },
    get stdin() {
      return child.stdin;
    },
    get lostWithHost() {
      return child.lostWithHost;
    },
    kill: (signal) => child.kill(signal),
    on(event: string, listener: (...a: never[]) => void) {
      (child.on as (e: string, l: unknown) => SpawnedChild)(event, wrap(event, listener));
      return proxy;
    },
    once(event: string, listener: (...a: never[]) => void) {
      (child.once as (e: string, l: unknown) => SpawnedChild)(event, wrap(event, listener));
      return proxy;
    },
  } as SpawnedChild;
  return proxy;
}

/**
 * Every program started through this spawner runs in the sandbox `plan` describes. The Job
 * user's identity is applied inside the sandbox (not by the spawner), and HOME and TMPDIR
 * point into it.
 */
export function sandboxSpawner(spawner: Spawner, support: SandboxSupport, plan: SandboxPlan, defaultEnv: () => Record<string, string>): Spawner {
  return {
    spawn(program: string, args: readonly string[], options: SpawnOptions): SpawnedChild {
      const env = { ...(options.env ?? defaultEnv()) };
      if (plan.home !== undefined) env["HOME"] = plan.home;
      env["TMPDIR"] = "/tmp";
      const cmd = sandboxCommand(support, plan, program, args, options.cwd, env);
      const { uid: _uid, gid: _gid, ...rest } = options;
      return withSignalExits(spawner.spawn(cmd.program, cmd.args, { ...rest, cwd: "/", env: cmd.env }));
    },
    close: () => spawner.close(),
  };
}
