/**
 * Entry of the spawn host: a small Node process the Runner forks once and then asks to spawn
 * programs, so each fork copies this process (tens of MB) instead of the Runner. It only
 * relays: spawn requests and stdin in, pid, output, exit and close out. It exits with its
 * parent (IPC disconnect), so it never outlives the Runner; the programs it started keep
 * the fate they would have had as direct children of the Runner.
 */
import { spawn, type ChildProcess } from "node:child_process";
import type { Readable } from "node:stream";
import { spawnWithin } from "./cgroup-enter.js";
import type { HostEvent, HostRequest, SerializedError } from "./spawn-host-protocol.js";

const children = new Map<number, ChildProcess>();

function send(event: HostEvent, onSent?: () => void): boolean {
  if (!process.connected) return false;
  return process.send!(event, undefined, undefined, () => onSent?.());
}

function serializeError(error: unknown): SerializedError {
  const e = error as NodeJS.ErrnoException;
  const out: SerializedError = { message: e instanceof Error ? e.message : String(error) };
  if (typeof e.code === "string") out.code = e.code;
  if (typeof e.errno === "number") out.errno = e.errno;
  if (typeof e.syscall === "string") out.syscall = e.syscall;
  if (typeof e.path === "string") out.path = e.path;
  return out;
}

/** Forwards output; pauses the pipe while the IPC backlog is large so memory stays bounded. */
function relay(id: number, fd: 1 | 2, stream: Readable): void {
  stream.on("data", (data: Buffer) => {
    if (!send({ t: "out", id, fd, data }, () => stream.resume())) stream.pause();
  });
  stream.on("error", () => {});
}

function start(request: Extract<HostRequest, { t: "spawn" }>): void {
  const { id } = request;
  let child: ChildProcess;
  try {
    child = spawnWithin(request.cgroups, () =>
      spawn(request.program, request.args, {
        cwd: request.cwd,
        env: request.env,
        detached: request.detached,
        stdio: [request.stdin ? "pipe" : "ignore", "pipe", "pipe"],
        windowsHide: true,
        ...(request.uid === undefined ? {} : { uid: request.uid }),
        ...(request.gid === undefined ? {} : { gid: request.gid }),
      }),
    );
  } catch (error) {
    send({ t: "error", id, error: serializeError(error) });
    send({ t: "close", id, code: null, signal: null });
    return;
  }
  children.set(id, child);
  // The pid is known once the fork succeeded; "spawn" follows on the next tick then. Sending
  // it now narrows the window in which the Runner could lose track of a started program.
  if (child.pid !== undefined) send({ t: "spawn", id, pid: child.pid });
  child.on("error", (error) => send({ t: "error", id, error: serializeError(error) }));
  child.stdin?.on("error", () => {});
  relay(id, 1, child.stdout!);
  relay(id, 2, child.stderr!);
  child.once("exit", (code, signal) => send({ t: "exit", id, code, signal }));
  child.once("close", (code, signal) => {
    children.delete(id);
    send({ t: "close", id, code, signal });
  });
}

process.on("message", (request: HostRequest) => {
  switch (request.t) {
    case "spawn":
      start(request);
      break;
    case "stdin":
      children.get(request.id)?.stdin?.write(request.data);
      break;
    case "stdin-end":
      children.get(request.id)?.stdin?.end();
      break;
  }
});
process.on("disconnect", () => process.exit(0));
send({ t: "ready" });
