/**
 * The spawn host, Runner side. On Linux `spawn` forks the caller, and a fork costs time in
 * proportion to the caller's resident memory: from the embedded server (~900 MB) a `true`
 * takes tens of milliseconds. The host is a small Node process forked once, lazily, that
 * spawns on the Runner's behalf; children look to the Runner like ChildProcess objects
 * (`SpawnedChild`), and signals to them and their process groups are still sent from here,
 * by their real pids.
 *
 * Nothing is lost silently: when the host dies, each child it had started is killed (its
 * process group when detached) and reports an exit with unknown status (code and signal
 * null); a child whose spawn was not yet confirmed reports an "error" (ESPAWNHOST). The
 * next spawn starts a new host. A host that never becomes ready makes the Runner spawn
 * directly from then on, with a warning.
 *
 * One concept over 400 lines: the spawn host (its protocol, the host process and the
 * Runner-side client share one message vocabulary).
 */
import { fork, type ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { fileURLToPath } from "node:url";
import { Readable, Writable, finished } from "node:stream";
import type { Logger } from "@webcodex/platform";
import { minimalProcessEnv } from "./child-env.js";
import { signalGroup } from "./process-group.js";
import type { HostEvent, HostRequest, SerializedError } from "./spawn-host-protocol.js";
import { spawnDirect, type SpawnedChild, type SpawnOptions, type Spawner } from "./spawner.js";

const DEFAULT_CHILD_MODULE = fileURLToPath(new URL("./spawn-host-child.js", import.meta.url));
const DEFAULT_READY_TIMEOUT_MS = 10_000;
const CHANNEL_DRAIN_MS = 1_000;

export interface SpawnHostOptions {
  logger?: Logger;
  /** Compiled entry of the host (a test seam); default: spawn-host-child.js next to this file. */
  childModule?: string;
  /** How long the host may take to become ready before the Runner falls back to direct spawning. */
  readyTimeoutMs?: number;
}

export interface SpawnHost extends Spawner {
  /** Pid of the running host, if one is running (for tests and diagnostics). */
  readonly hostPid: number | undefined;
  /** True once the host could not be started and spawning went direct. */
  readonly fellBack: boolean;
}

function toError(serialized: SerializedError): Error {
  return Object.assign(new Error(serialized.message), serialized);
}

function streamDone(stream: Readable): Promise<void> {
  return new Promise((resolve) => finished(stream, () => resolve()));
}

/** Where a proxied child's stdin bytes go: the host, or (after a fallback) a real child. */
type StdinSink = (data: Buffer | null, done: () => void) => void;

/**
 * A child started by the host, seen through the ChildProcess surface the Runner uses. The
 * feeding methods (`spawned`, `output`, ...) are called by whichever backend runs it.
 */
class ProxiedChild extends EventEmitter implements SpawnedChild {
  pid: number | undefined;
  readonly stdout = new Readable({ read() {} });
  readonly stderr = new Readable({ read() {} });
  readonly stdin: Writable | null;
  readonly detached: boolean;
  exited = false;
  closed = false;
  #sink: StdinSink;

  constructor(detached: boolean, pipeStdin: boolean, sink: StdinSink) {
    super();
    this.detached = detached;
    this.#sink = sink;
    this.stdin = pipeStdin
      ? new Writable({
          write: (chunk: Buffer, _encoding, callback) => this.#sink(chunk, () => callback()),
          final: (callback) => this.#sink(null, () => callback()),
        })
      : null;
  }

  setSink(sink: StdinSink): void {
    this.#sink = sink;
  }

  /** Replays stdin bytes that were accepted before the backend changed. */
  feedStdin(data: Buffer | null): void {
    this.#sink(data, () => {});
  }

  kill(signal: NodeJS.Signals = "SIGTERM"): boolean {
    if (this.pid === undefined || this.exited) return false;
    try {
      process.kill(this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  spawned(pid: number): void {
    this.pid = pid;
    this.emit("spawn");
  }

  output(fd: 1 | 2, data: Buffer): void {
    (fd === 1 ? this.stdout : this.stderr).push(data);
  }

  failed(error: Error): void {
    // Unlike a ChildProcess, never throw for want of a listener: this may run for many children at once.
    if (this.listenerCount("error") > 0) this.emit("error", error);
  }

  /** See SpawnedChild.lostWithHost. */
  lostWithHost = false;

  exit(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.exited) return;
    this.exited = true;
    this.emit("exit", code, signal);
  }

  /** Ends the output streams and emits "close" once both were consumed (or destroyed). */
  close(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.closed) return;
    this.closed = true;
    this.stdout.push(null);
    this.stderr.push(null);
    this.stdin?.destroy();
    void Promise.all([streamDone(this.stdout), streamDone(this.stderr)]).then(() => this.emit("close", code, signal));
  }
}

/** Runs a proxied child as a direct child of this process (fallback when the host cannot start). */
function runDirect(proxy: ProxiedChild, program: string, args: readonly string[], options: SpawnOptions): void {
  let child: SpawnedChild;
  try {
    child = spawnDirect(program, args, options);
  } catch (error) {
    proxy.failed(error as Error);
    proxy.close(null, null);
    return;
  }
  proxy.setSink((data, done) => {
    if (child.stdin === null) return done();
    if (data === null) child.stdin.end(done);
    else child.stdin.write(data, () => done());
  });
  child.stdin?.on("error", () => {});
  child.once("spawn", () => proxy.spawned(child.pid!));
  child.on("error", (error) => proxy.failed(error));
  child.stdout.on("data", (data: Buffer) => proxy.output(1, data));
  child.stderr.on("data", (data: Buffer) => proxy.output(2, data));
  child.once("exit", (code, signal) => proxy.exit(code, signal));
  child.once("close", (code, signal) => proxy.close(code, signal));
}

interface Pending {
  proxy: ProxiedChild;
  program: string;
  args: readonly string[];
  options: SpawnOptions;
}

/** One host process and the children it runs. */
class HostConnection {
  readonly process: ChildProcess;
  readonly children = new Map<number, ProxiedChild>();
  ready = false;
  dead = false;
  /** close() is waiting for the host to exit, which must keep the event loop alive. */
  closing = false;
  /** Requests made before the host was ready, in order. */
  queue: HostRequest[] = [];
  /** What the queued spawn requests were, for a fallback to direct spawning. */
  queuedSpawns = new Map<number, Pending>();

  constructor(child: ChildProcess) {
    this.process = child;
  }

  send(request: HostRequest, done?: () => void): void {
    if (!this.ready) {
      this.queue.push(request);
      done?.();
      return;
    }
    if (this.dead || !this.process.connected) {
      done?.();
      return;
    }
    this.process.send(request, undefined, undefined, () => done?.());
  }

  /** Keeps the Runner's event loop alive only while children run, as pipes of direct children would. */
  updateRef(): void {
    if (this.children.size > 0 || !this.ready || this.closing) {
      this.process.ref();
      this.process.channel?.ref();
    } else {
      this.process.unref();
      this.process.channel?.unref();
    }
  }
}

class SpawnHostImpl implements SpawnHost {
  readonly #options: SpawnHostOptions;
  #host: HostConnection | undefined;
  #nextId = 1;
  #fellBack = false;
  #closed = false;

  constructor(options: SpawnHostOptions) {
    this.#options = options;
  }

  get hostPid(): number | undefined {
    return this.#host?.ready === true ? this.#host.process.pid : undefined;
  }

  get fellBack(): boolean {
    return this.#fellBack;
  }

  spawn(program: string, args: readonly string[], options: SpawnOptions): SpawnedChild {
    if (this.#fellBack || this.#closed) return spawnDirect(program, args, options);
    const host = this.#ensureHost();
    if (host === undefined) return spawnDirect(program, args, options);
    const id = this.#nextId++;
    const detached = options.detached === true;
    const pipeStdin = options.stdin === "pipe";
    const proxy = new ProxiedChild(detached, pipeStdin, (data, done) => host.send(data === null ? { t: "stdin-end", id } : { t: "stdin", id, data }, done));
    host.children.set(id, proxy);
    if (!host.ready) host.queuedSpawns.set(id, { proxy, program, args, options });
    host.updateRef();
    host.send({
      t: "spawn",
      id,
      program,
      args: [...args],
      cwd: options.cwd,
      env: options.env ?? minimalProcessEnv(),
      detached,
      stdin: pipeStdin,
      ...(options.cgroups === undefined || options.cgroups.length === 0 ? {} : { cgroups: [...options.cgroups] }),
      ...(options.uid === undefined ? {} : { uid: options.uid }),
      ...(options.gid === undefined ? {} : { gid: options.gid }),
    });
    return proxy;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const host = this.#host;
    this.#host = undefined;
    if (host === undefined || host.dead || host.process.exitCode !== null || host.process.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => host.process.once("exit", () => resolve()));
    host.closing = true;
    host.updateRef();
    // Disconnecting makes the host exit by itself; children still running are lost with it.
    if (host.process.connected) host.process.disconnect();
    else host.process.kill("SIGKILL");
    await exited;
  }

  #ensureHost(): HostConnection | undefined {
    if (this.#host !== undefined && !this.#host.dead) return this.#host;
    let child: ChildProcess;
    try {
      child = fork(this.#options.childModule ?? DEFAULT_CHILD_MODULE, [], {
        serialization: "advanced",
        execArgv: ["--max-old-space-size=64"],
        // Jobs are its children and can read its /proc/<pid>/environ: it gets nothing secret.
        env: minimalProcessEnv(),
        // Its stdout goes to our stderr: stdout may carry a protocol (`webcodex stdio`).
        stdio: ["ignore", 2, "inherit", "ipc"],
      });
    } catch (error) {
      this.#fallBack(undefined, error);
      return undefined;
    }
    const host = new HostConnection(child);
    this.#host = host;
    const readyTimer = setTimeout(() => {
      if (!host.ready) this.#lost(host, new Error("spawn host did not become ready in time"));
    }, this.#options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS);
    readyTimer.unref();
    child.on("message", (event: HostEvent) => this.#onEvent(host, event, readyTimer));
    child.on("error", (error) => this.#lost(host, error));
    child.on("disconnect", () => this.#lost(host, new Error("spawn host disconnected")));
    child.on("exit", (code, signal) => {
      const reason = new Error(`spawn host exited (code ${code}, signal ${signal})`);
      // Events still in the channel (a child's real exit, say) are read before "disconnect";
      // settle only then, unless the channel never reports its end.
      if (!child.connected) this.#lost(host, reason);
      else setTimeout(() => this.#lost(host, reason), CHANNEL_DRAIN_MS).unref();
    });
    host.updateRef();
    return host;
  }

  #onEvent(host: HostConnection, event: HostEvent, readyTimer: NodeJS.Timeout): void {
    if (event.t === "ready") {
      clearTimeout(readyTimer);
      host.ready = true;
      host.queuedSpawns.clear();
      const queue = host.queue;
      host.queue = [];
      for (const request of queue) host.send(request);
      host.updateRef();
      return;
    }
    const proxy = host.children.get(event.id);
    if (proxy === undefined) return;
    switch (event.t) {
      case "spawn":
        proxy.spawned(event.pid);
        break;
      case "error":
        proxy.failed(toError(event.error));
        break;
      case "out":
        proxy.output(event.fd, event.data);
        break;
      case "exit":
        proxy.exit(event.code, event.signal);
        break;
      case "close":
        host.children.delete(event.id);
        host.updateRef();
        proxy.close(event.code, event.signal);
        break;
    }
  }

  /** The host is gone (or never came up): settle every child it held; nothing is dropped. */
  #lost(host: HostConnection, reason: unknown): void {
    if (host.dead && host.children.size === 0) return;
    const wasReady = host.ready;
    host.dead = true;
    if (this.#host === host) this.#host = undefined;
    if (host.process.exitCode === null && host.process.signalCode === null) host.process.kill("SIGKILL");
    if (!wasReady) {
      // Never started: nothing ran yet, so the queued requests can run directly instead.
      this.#fallBack(host, reason);
      return;
    }
    const children = [...host.children.values()];
    host.children.clear();
    host.updateRef();
    if (children.length > 0) {
      this.#options.logger?.warn("spawn host died; its running children were killed", {
        children: children.length,
        reason: reason instanceof Error ? reason.message : String(reason),
      });
    }
    for (const proxy of children) {
      if (proxy.pid === undefined) {
        proxy.failed(Object.assign(new Error("spawn host exited before the spawn was confirmed"), { code: "ESPAWNHOST" }));
        proxy.close(null, null);
        continue;
      }
      // Its output pipes died with the host; the outcome can no longer be observed.
      if (proxy.detached) signalGroup(proxy.pid, "SIGKILL");
      else proxy.kill("SIGKILL");
      proxy.lostWithHost = true;
      proxy.exit(null, null);
      proxy.close(null, null);
    }
  }

  #fallBack(host: HostConnection | undefined, reason: unknown): void {
    this.#fellBack = true;
    if (!this.#closed)
      this.#options.logger?.warn("spawn host could not be started; spawning directly from the Runner", {
        reason: reason instanceof Error ? reason.message : String(reason),
      });
    if (host === undefined) return;
    const queue = host.queue;
    const pending = host.queuedSpawns;
    host.queue = [];
    host.queuedSpawns = new Map();
    host.children.clear();
    host.updateRef();
    // In request order, so stdin accepted while waiting reaches the program it was meant for.
    for (const request of queue) {
      const entry = pending.get(request.id);
      if (entry === undefined) continue;
      if (request.t === "spawn") runDirect(entry.proxy, entry.program, entry.args, entry.options);
      else entry.proxy.feedStdin(request.t === "stdin" ? request.data : null);
    }
  }
}

/**
 * Creates a spawner backed by a spawn host process, started on first use and restarted on
 * the first use after it died. `close()` disconnects it (it then exits by itself).
 */
export function createSpawnHost(options: SpawnHostOptions = {}): SpawnHost {
  return new SpawnHostImpl(options);
}
