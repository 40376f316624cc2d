/**
 * Secrets out of reach of the programs a Runner starts. On Linux `/proc/<pid>/environ` shows
 * the environment a process was started with to every process of the same user, whatever the
 * process later does to `process.env`: it is read from the memory the kernel laid the strings
 * out in. So a credential given in the environment would be readable by every Job the Runner
 * (or `webcodex dev`, which hosts one) starts. `sealSecretEnvironment` keeps a private copy of
 * the environment for configuration, then overwrites the values of secret-bearing variables
 * in that memory (through `/proc/self/mem`) and removes them from `process.env`, so neither
 * `/proc/<pid>/environ` nor a child that inherits `process.env` sees them.
 */
import { closeSync, openSync, readFileSync, readSync, writeSync } from "node:fs";
import type { Env } from "./config.js";

/** WEBCODEX_* variables whose values are credentials or may carry one (URLs with passwords). */
const SECRET_NAME = /^WEBCODEX_(?:.*(?:TOKEN|SECRET|PASSWORD|CREDENTIAL)|.*_KEY|POSTGRES_URL|REDIS_URL)$/;

/** True for a variable whose value must never stay visible in the process environment. */
export function isSecretEnvName(name: string): boolean {
  return SECRET_NAME.test(name) && !name.endsWith("_FILE") && name !== "WEBCODEX_REDIS_KEY_PREFIX";
}

export interface SealedEnvironment {
  /** The environment as the process was started with it: read configuration from this. */
  env: Env;
  /** Names whose values were blanked in /proc/self/environ and removed from process.env. */
  sealed: string[];
  /** False where the start-time environment could not be overwritten (not Linux, no /proc). */
  scrubbed: boolean;
}

/**
 * Copies `process.env`, then removes every secret-bearing variable from the process's own
 * environment (see the module comment). Call it first thing, before any child is started.
 */
export function sealSecretEnvironment(isSecret: (name: string) => boolean = isSecretEnvName): SealedEnvironment {
  const env: Env = { ...process.env };
  const sealed = Object.keys(env).filter((name) => isSecret(name) && env[name] !== undefined && env[name] !== "");
  const scrubbed = sealed.length === 0 ? true : blankStartEnvironment(new Set(sealed));
  for (const name of sealed) delete process.env[name];
  return { env, sealed, scrubbed };
}

/** Overwrites the values of `names` in the start-time environment block with "*". */
function blankStartEnvironment(names: ReadonlySet<string>): boolean {
  let fd: number | undefined;
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    // Fields after the command name start at field 3; env_start and env_end are fields 50 and 51.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const start = Number(fields[50 - 3]);
    const end = Number(fields[51 - 3]);
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || end <= start || end - start > 16 * 1024 * 1024) return false;
    fd = openSync("/proc/self/mem", "r+");
    const block = Buffer.alloc(end - start);
    readSync(fd, block, 0, block.length, start);
    let offset = 0;
    while (offset < block.length) {
      let stop = block.indexOf(0, offset);
      if (stop === -1) stop = block.length;
      const eq = block.indexOf(0x3d, offset);
      if (eq !== -1 && eq < stop && names.has(block.toString("utf8", offset, eq)) && stop > eq + 1) {
        block.fill(0x2a, eq + 1, stop);
        writeSync(fd, block, eq + 1, stop - eq - 1, start + eq + 1);
      }
      offset = stop + 1;
    }
    return true;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
