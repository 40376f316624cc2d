/**
 * Process-group signalling. Every job is spawned as the leader of its own group (setsid via
 * `detached: true`), so one signal to -pgid reaches the job's whole tree, including children
 * and grandchildren, and nothing outlives a timeout or cancel as an orphan.
 */
import { readdir, readFile } from "node:fs/promises";

/** Sends `signal` to every process of the group; false when the group no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    // ESRCH: group gone. EPERM cannot happen for our own children; treat as gone either way.
    return false;
  }
}

/** True while any member of the group exists (zombies included, so it errs on "alive"). */
export function groupAlive(pgid: number): boolean {
  return signalGroup(pgid, 0);
}

const POLL_MS = 50;

/**
 * SIGTERM to the group, then SIGKILL once `graceMs` has passed if anything is still alive.
 * Polls meanwhile so the timer stops as soon as the group is gone instead of holding the
 * event loop for the whole grace.
 */
export function terminateGroup(pgid: number, graceMs: number): void {
  if (!signalGroup(pgid, "SIGTERM")) return;
  const deadline = Date.now() + graceMs;
  const timer = setInterval(
    () => {
      if (!groupAlive(pgid)) {
        clearInterval(timer);
      } else if (Date.now() >= deadline) {
        clearInterval(timer);
        signalGroup(pgid, "SIGKILL");
      }
    },
    Math.min(POLL_MS, Math.max(1, graceMs)),
  );
}

/**
 * The variable every Job's processes carry, so a process that left the Job's group and session
 * (`setsid`, a double fork reparented to init) is still found and ended with its Job. This is
 * the containment used where no cgroup can be created for a Job: a process that deliberately
 * clears its environment before detaching is not found (see docs/security.md).
 */
export const JOB_TAG_ENV = "WEBCODEX_JOB_TAG";

/** Pids of this user's live processes whose start-time environment holds `tag`. */
export async function taggedProcesses(tag: string): Promise<number[]> {
  const entry = Buffer.from(`${JOB_TAG_ENV}=${tag}\0`);
  const inner = Buffer.from(`\0${JOB_TAG_ENV}=${tag}\0`);
  let names: string[];
  try {
    names = await readdir("/proc");
  } catch {
    return [];
  }
  const found: number[] = [];
  await Promise.all(
    names
      .filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid)
      .map(async (name) => {
        try {
          const environ = await readFile(`/proc/${name}/environ`);
          if (environ.subarray(0, entry.length).equals(entry) || environ.includes(inner)) found.push(Number(name));
        } catch {
          // Gone, or another user's process: not ours to end.
        }
      }),
  );
  return found;
}

function signalPids(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/**
 * Ends a Job: its process group (as terminateGroup) and every process carrying its tag, SIGTERM
 * first and SIGKILL after `graceMs` for whatever is still there. Resolves once the tagged
 * processes were found and signalled the first time.
 */
export async function terminateJob(pgid: number, tag: string, graceMs: number): Promise<void> {
  terminateGroup(pgid, graceMs);
  const first = await taggedProcesses(tag);
  if (first.length === 0) return;
  signalPids(first, "SIGTERM");
  const timer = setTimeout(() => {
    void taggedProcesses(tag).then((left) => signalPids(left, "SIGKILL"));
  }, graceMs);
  timer.unref();
}
