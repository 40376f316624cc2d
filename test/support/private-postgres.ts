/**
 * A private PostgreSQL cluster for one test (initdb in a temp dir, its own port), so a test
 * can stop the server for real (`pg_ctl stop -m fast`) and start it again. Uses the newest
 * /usr/lib/postgresql/<v>/bin (or WEBCODEX_TEST_PG_BIN). Postgres refuses to run as root:
 * as root, every command runs as the `postgres` user through runuser. Never skipped: missing
 * binaries or user fail with a message that says so.
 */
import { execFile } from "node:child_process";
import { chownSync, existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { userInfo } from "node:os";
import { findFreeBasePort } from "@webcodex/cli";
import { tempDir } from "./processes.js";

const run = promisify(execFile);

export interface PrivatePostgres {
  /** postgres://postgres@127.0.0.1:<port>/postgres (trust auth). */
  readonly url: string;
  readonly port: number;
  /** `pg_ctl start -w`: returns once the server accepts connections. */
  start(): Promise<void>;
  /** `pg_ctl stop -m fast -w`: clients are disconnected, the port is closed. */
  stop(): Promise<void>;
  /** Stops the server if running and removes the cluster. */
  destroy(): Promise<void>;
}

function binDir(): string {
  const configured = process.env["WEBCODEX_TEST_PG_BIN"];
  if (configured) {
    if (!existsSync(join(configured, "pg_ctl"))) throw new Error(`WEBCODEX_TEST_PG_BIN=${configured} has no pg_ctl`);
    return configured;
  }
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root).filter((v) => existsSync(join(root, v, "bin", "initdb")) && existsSync(join(root, v, "bin", "pg_ctl")))
    : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) {
    throw new Error(
      `this test needs the PostgreSQL server binaries (initdb, pg_ctl) under ${root}/<version>/bin, or WEBCODEX_TEST_PG_BIN naming their directory; none found (Debian: apt-get install postgresql)`,
    );
  }
  return join(root, newest, "bin");
}

/** As root, the `postgres` user's uid and gid (postgres will not run as root). */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith("postgres:"));
  const [, , uid, gid] = line?.split(":") ?? [];
  if (!uid || !gid)
    throw new Error(
      `this test runs as root (${userInfo().username}) and PostgreSQL refuses root; it needs a "postgres" user to run the server as, and there is none`,
    );
  return { uid: Number(uid), gid: Number(gid) };
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = binDir();
  const user = runAs();
  const dir = tempDir("wcx-pg-");
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, "data");
  const log = join(dir, "server.log");
  const port = await findFreeBasePort(1);
  const cmd = async (tool: string, args: string[]) => {
    const [file, argv] = user ? ["runuser", ["-u", "postgres", "--", join(bin, tool), ...args]] : [join(bin, tool), args];
    try {
      await run(file, argv, { timeout: 60_000 });
    } catch (error) {
      const e = error as { stderr?: string; message: string };
      const tail = existsSync(log) ? readFileSync(log, "utf8").slice(-2_000) : "";
      throw new Error(`${tool} ${args.join(" ")} failed: ${e.stderr || e.message}${tail ? `\nserver log:\n${tail}` : ""}`);
    }
  };
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off`;
  let running = false;
  const start = async () => {
    await cmd("pg_ctl", ["-D", data, "-l", log, "-w", "-t", "30", "-o", options, "start"]);
    running = true;
  };
  const stop = async () => {
    await cmd("pg_ctl", ["-D", data, "-m", "fast", "-w", "-t", "30", "stop"]);
    running = false;
  };
  await cmd("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    stop,
    async destroy() {
      if (running) await stop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
