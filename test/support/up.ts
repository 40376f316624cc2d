/** `webcodex up` as a user runs it: one command, its own process group, the MCP URL on stdout. */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { cliPath } from "./processes.js";

export interface UpStack {
  child: ChildProcess;
  mcpUrl: string;
  output: () => string;
}

/** Starts `webcodex up <args>` with exactly `env`; resolves once it prints its MCP URL. */
export function startUp(env: Record<string, string>, args: string[], timeoutMs = 180_000): Promise<UpStack> {
  const child = spawn(process.execPath, [cliPath, "up", ...args], { env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`webcodex up did not start in ${timeoutMs} ms\n${out}`)), timeoutMs);
    child.stdout?.on("data", () => {
      const m = /MCP URL: (\S+)/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve({ child, mcpUrl: m[1], output: () => out });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`webcodex up exited with ${code}\n${out}`));
    });
  });
}

/** SIGTERM (the stack stops its services and Runners), then SIGKILL of the group after `graceMs`. */
export async function stopUp(child: ChildProcess, graceMs = 20_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => void killUp(child), graceMs);
  await exited;
  clearTimeout(timer);
}

/** SIGKILL of the whole stack: every process in the command's process group at once. */
export function killUp(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    try {
      process.kill(-(child.pid as number), "SIGKILL");
    } catch {
      resolve();
    }
  });
}
