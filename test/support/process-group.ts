/** Process-group liveness for orphan checks (Linux /proc). */
import { readdirSync, readFileSync } from "node:fs";

/**
 * True while a live (non-zombie) process of the group `pgid` exists. A killed process stays
 * a zombie until its new parent reaps it, and kill(-pgid, 0) would still count it.
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
