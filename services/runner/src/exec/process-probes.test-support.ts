/**
 * Liveness probes over Linux /proc that tell a live process from a zombie: the orphan checks
 * of the Runner's tests and of the end-to-end suites (`@webcodex/runner/process-probes`). A
 * killed process stays a zombie until its parent reaps it, and kill(pid, 0) or kill(-pgid, 0)
 * would still count it. Test support only (a *.test-support file: pruned from images).
 */
import { readdirSync, readFileSync } from "node:fs";

/** The fields of a /proc/<pid>/stat line after the command name: state, ppid, pgrp, ... */
function statFields(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** True while a live (non-zombie) process of the group `pgid` exists. */
export function processGroupAlive(pgid: number): boolean {
  return readdirSync("/proc").some((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [state, , pgrp] = statFields(stat);
      return Number(pgrp) === pgid && state !== "Z" && state !== "X";
    } catch {
      return false;
    }
  });
}

/** True when the pid no longer runs: gone, or a zombie nobody has reaped yet. */
export function pidGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    const [state] = statFields(readFileSync(`/proc/${pid}/stat`, "utf8"));
    return state === "Z" || state === "X";
  } catch {
    return true;
  }
}
