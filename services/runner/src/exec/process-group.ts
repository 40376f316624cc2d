/**
 * Process-group signalling. Every job is spawned as the leader of its own group (setsid via
 * `detached: true`), so one signal to -pgid reaches the job's whole tree, including children
 * and grandchildren, and nothing outlives a timeout or cancel as an orphan.
 */
import { readdirSync, readFileSync } from "node:fs";

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

/**
 * True while a live (non-zombie) process of the group `pgid` exists (Linux /proc): the
 * orphan check of tests and diagnostics. A killed
 * process stays a zombie until its parent reaps it, and kill(-pgid, 0) would still count it.
 */
export function processGroupAlive(pgid: number): boolean {
  return readdirSync("/proc").some((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return Number(pgrp) === pgid && state !== "Z" && state !== "X";
    } catch {
      return false;
    }
  });
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
  const timer = setInterval(() => {
    if (!groupAlive(pgid)) {
      clearInterval(timer);
    } else if (Date.now() >= deadline) {
      clearInterval(timer);
      signalGroup(pgid, "SIGKILL");
    }
  }, Math.min(POLL_MS, Math.max(1, graceMs)));
}
