/**
 * A private Redis server for one test (its own port, no persistence: `--save '' --appendonly
 * no`), so a test can stop it for real and start it again on the same port without touching
 * the machine's shared Redis. A restart therefore loses every key, as a Redis without
 * persistence does. Uses `redis-server` from PATH (or WEBCODEX_TEST_REDIS_SERVER); never
 * skipped: a missing binary fails with a message that says so.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createConnection } from "node:net";
import { findFreeBasePort } from "@webcodex/cli";
import { tempDir } from "./processes.js";
import { until } from "./until.js";

export interface PrivateRedis {
  /** redis://127.0.0.1:<port> */
  readonly url: string;
  readonly port: number;
  /** Starts the server; returns once it answers PING. */
  start(): Promise<void>;
  /** SIGTERM (no save configured, so nothing is written), waits for the process to exit. */
  stop(): Promise<void>;
  /** Stops the server if running. */
  destroy(): Promise<void>;
}

/** One PING over a fresh connection: true when the server answers +PONG. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (d) => done(d.toString().startsWith("+PONG")));
  });
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const binary = process.env["WEBCODEX_TEST_REDIS_SERVER"] ?? "redis-server";
  const dir = tempDir("wcx-redis-");
  const port = await findFreeBasePort(1);
  let child: ChildProcess | undefined;
  let log = "";
  const start = async () => {
    const proc = spawn(binary, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "no"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    child = proc;
    proc.stdout?.on("data", (d: Buffer) => (log = (log + d.toString()).slice(-4_000)));
    proc.stderr?.on("data", (d: Buffer) => (log = (log + d.toString()).slice(-4_000)));
    const failed = new Promise<never>((_, reject) => {
      proc.once("error", (error) =>
        reject(new Error(`${binary} could not start (${error.message}); this test needs redis-server on PATH or WEBCODEX_TEST_REDIS_SERVER`)),
      );
      proc.once("exit", (code) => reject(new Error(`${binary} exited with ${code} during start:\n${log}`)));
    });
    failed.catch(() => undefined);
    await Promise.race([until(`redis-server on port ${port} answers PING`, () => ping(port), 15_000, 50), failed]);
  };
  const stop = async () => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGTERM");
    const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, port, start, stop, destroy: stop };
}
