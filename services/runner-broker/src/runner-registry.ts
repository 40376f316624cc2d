/**
 * Which Runner serves which Project, and whether it is still alive. A Runner that misses
 * heartbeats for `lostAfterMs` is lost: its Project is unroutable until a Runner registers
 * again. Two implementations behind one interface: Redis (distributed, shared by broker
 * replicas) and in-process (embedded).
 */
import type { Redis } from "@webcodex/platform";

export interface RunnerRegistration {
  runnerId: string;
  clientId: string;
  projectId: string;
  /** agent:<client_id>:<project_id> */
  canonicalId: string;
  rootIdentity: string;
  protocolGeneration: number;
  build: string;
  capabilities: string[];
  endpointUrl: string;
  registeredAtMs: number;
}

export interface RunnerState extends RunnerRegistration {
  lastHeartbeatMs: number;
  connectionState: "connected" | "lost";
}

export interface RunnerRegistry {
  register(registration: RunnerRegistration): Promise<void>;
  /** False when the Runner is unknown (it must register again). */
  heartbeat(runnerId: string): Promise<boolean>;
  /** The live Runner serving a Project, if any. */
  forProject(canonicalId: string): Promise<RunnerState | undefined>;
  list(): Promise<RunnerState[]>;
}

export function createMemoryRunnerRegistry(options: { lostAfterMs: number; now?: () => number }): RunnerRegistry {
  const now = options.now ?? Date.now;
  const runners = new Map<string, { reg: RunnerRegistration; last: number }>();
  const byProject = new Map<string, string>();
  const state = (e: { reg: RunnerRegistration; last: number }): RunnerState => ({
    ...e.reg,
    lastHeartbeatMs: e.last,
    connectionState: now() - e.last <= options.lostAfterMs ? "connected" : "lost",
  });
  return {
    async register(reg) {
      runners.set(reg.runnerId, { reg, last: now() });
      byProject.set(reg.canonicalId, reg.runnerId);
    },
    async heartbeat(runnerId) {
      const e = runners.get(runnerId);
      if (!e) return false;
      e.last = now();
      return true;
    },
    async forProject(canonicalId) {
      const id = byProject.get(canonicalId);
      const e = id ? runners.get(id) : undefined;
      if (!e) return undefined;
      const s = state(e);
      return s.connectionState === "connected" ? s : undefined;
    },
    async list() {
      return [...runners.values()].map(state);
    },
  };
}

/**
 * Redis layout (all under `prefix`): `runner:<id>` JSON registration, `alive:<id>` with a
 * TTL of lostAfterMs refreshed by heartbeats, `project:<canonical>` → runner id, and the
 * set `runners`.
 */
export function createRedisRunnerRegistry(redis: Redis, options: { lostAfterMs: number; prefix?: string }): RunnerRegistry {
  const p = options.prefix ?? "webcodex:broker:";
  const ttl = options.lostAfterMs;
  const load = async (runnerId: string): Promise<RunnerState | undefined> => {
    const [json, alive] = await redis.mget(`${p}runner:${runnerId}`, `${p}alive:${runnerId}`);
    if (!json) return undefined;
    const reg = JSON.parse(json) as RunnerRegistration & { lastHeartbeatMs?: number };
    return { ...reg, lastHeartbeatMs: alive ? Number(alive) : reg.lastHeartbeatMs ?? reg.registeredAtMs, connectionState: alive ? "connected" : "lost" };
  };
  return {
    async register(reg) {
      const now = Date.now();
      await redis
        .multi()
        .set(`${p}runner:${reg.runnerId}`, JSON.stringify(reg))
        .set(`${p}alive:${reg.runnerId}`, String(now), "PX", ttl)
        .set(`${p}project:${reg.canonicalId}`, reg.runnerId)
        .sadd(`${p}runners`, reg.runnerId)
        .exec();
    },
    async heartbeat(runnerId) {
      const exists = await redis.exists(`${p}runner:${runnerId}`);
      if (!exists) return false;
      await redis.set(`${p}alive:${runnerId}`, String(Date.now()), "PX", ttl);
      return true;
    },
    async forProject(canonicalId) {
      const id = await redis.get(`${p}project:${canonicalId}`);
      if (!id) return undefined;
      const s = await load(id);
      return s?.connectionState === "connected" ? s : undefined;
    },
    async list() {
      const ids = await redis.smembers(`${p}runners`);
      const states = await Promise.all(ids.map(load));
      return states.filter((s): s is RunnerState => s !== undefined);
    },
  };
}
