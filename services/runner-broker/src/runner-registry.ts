/**
 * Which Runners exist, what they are, and whether they are still alive. A Runner that misses
 * heartbeats for `lostAfterMs` (two heartbeat intervals) is lost. Who *serves* a Project is
 * decided by the Project lease (leases/), not here; this registry only remembers
 * registrations, liveness and the last Runner registered for each Project (for diagnostics).
 * Two implementations behind one interface: Redis (shared by broker replicas) and
 * in-process (embedded).
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
  /** How the Runner contains its Jobs ("" or absent: not reported). */
  containment?: string;
  /** The Runner's Jobs run under a uid of their own. */
  separateJobUid?: boolean;
  /** The sandbox the Runner's programs run in: "bwrap" or "none: <why>" (absent: not reported). */
  sandbox?: string;
  /** Write transactions the Runner's start-up recovery finished when it last started (absent: none). */
  recoveredWrites?: number;
}

export interface RunnerState extends RunnerRegistration {
  lastHeartbeatMs: number;
  connectionState: "connected" | "lost";
}

export interface RunnerRegistry {
  register(registration: RunnerRegistration): Promise<void>;
  /** False when the Runner is unknown (it must register again). */
  heartbeat(runnerId: string): Promise<boolean>;
  /** A Runner's registration and liveness, connected or lost. */
  get(runnerId: string): Promise<RunnerState | undefined>;
  /** The last Runner registered for a Project, connected or lost (diagnostics, not routing). */
  lastForProject(canonicalId: string): Promise<RunnerState | undefined>;
  /** The live Runner last registered for a Project, if any. */
  forProject(canonicalId: string): Promise<RunnerState | undefined>;
  list(): Promise<RunnerState[]>;
  /** Forgets the Runner last registered for a Project (the Project was deleted). */
  forgetProject(canonicalId: string): Promise<void>;
}

export interface RegistryOptions {
  lostAfterMs: number;
  /** How long a lost Runner stays listed (default 1 h). */
  retainLostMs?: number;
}

export function createMemoryRunnerRegistry(options: RegistryOptions & { now?: () => number }): RunnerRegistry {
  const now = options.now ?? Date.now;
  const retain = options.retainLostMs ?? 3_600_000;
  const runners = new Map<string, { reg: RunnerRegistration; last: number }>();
  const byProject = new Map<string, string>();
  const state = (e: { reg: RunnerRegistration; last: number }): RunnerState => ({
    ...e.reg,
    lastHeartbeatMs: e.last,
    connectionState: now() - e.last < options.lostAfterMs ? "connected" : "lost",
  });
  const entry = (runnerId: string) => {
    const e = runners.get(runnerId);
    if (e && now() - e.last > retain) {
      runners.delete(runnerId);
      return undefined;
    }
    return e;
  };
  const registry: RunnerRegistry = {
    async register(reg) {
      runners.set(reg.runnerId, { reg, last: now() });
      byProject.set(reg.canonicalId, reg.runnerId);
    },
    async heartbeat(runnerId) {
      const e = entry(runnerId);
      if (!e) return false;
      e.last = now();
      return true;
    },
    async get(runnerId) {
      const e = entry(runnerId);
      return e ? state(e) : undefined;
    },
    async lastForProject(canonicalId) {
      const id = byProject.get(canonicalId);
      const e = id ? entry(id) : undefined;
      return e ? state(e) : undefined;
    },
    async forProject(canonicalId) {
      const s = await registry.lastForProject(canonicalId);
      return s?.connectionState === "connected" ? s : undefined;
    },
    async list() {
      return [...runners.keys()]
        .map(entry)
        .filter((e) => e !== undefined)
        .map(state);
    },
    async forgetProject(canonicalId) {
      const id = byProject.get(canonicalId);
      if (id !== undefined) runners.delete(id);
      byProject.delete(canonicalId);
    },
  };
  return registry;
}

/**
 * Redis layout (all under `prefix`): `runner:<id>` JSON registration (kept `retainLostMs`
 * after the last heartbeat), `alive:<id>` with a TTL of lostAfterMs refreshed by heartbeats,
 * `project:<canonical>` → last registered runner id, and the set `runners` (pruned lazily).
 */
export function createRedisRunnerRegistry(redis: Redis, options: RegistryOptions & { prefix?: string }): RunnerRegistry {
  const p = options.prefix ?? "webcodex:broker:";
  const ttl = options.lostAfterMs;
  const retain = Math.max(options.retainLostMs ?? 3_600_000, ttl);
  const load = async (runnerId: string): Promise<RunnerState | undefined> => {
    const [json, alive] = await redis.mget(`${p}runner:${runnerId}`, `${p}alive:${runnerId}`);
    if (!json) return undefined;
    const reg = JSON.parse(json) as RunnerRegistration & { lastHeartbeatMs?: number };
    const { lastHeartbeatMs, ...registration } = reg;
    return { ...registration, lastHeartbeatMs: alive ? Number(alive) : (lastHeartbeatMs ?? reg.registeredAtMs), connectionState: alive ? "connected" : "lost" };
  };
  const registry: RunnerRegistry = {
    async register(reg) {
      const now = Date.now();
      await redis
        .multi()
        .set(`${p}runner:${reg.runnerId}`, JSON.stringify({ ...reg, lastHeartbeatMs: now }), "PX", retain)
        .set(`${p}alive:${reg.runnerId}`, String(now), "PX", ttl)
        .set(`${p}project:${reg.canonicalId}`, reg.runnerId, "PX", retain)
        .sadd(`${p}runners`, reg.runnerId)
        .exec();
    },
    async heartbeat(runnerId) {
      const json = await redis.get(`${p}runner:${runnerId}`);
      if (!json) return false;
      const now = Date.now();
      const reg = JSON.parse(json) as RunnerRegistration;
      await redis
        .multi()
        .set(`${p}runner:${runnerId}`, JSON.stringify({ ...reg, lastHeartbeatMs: now }), "PX", retain)
        .set(`${p}alive:${runnerId}`, String(now), "PX", ttl)
        .pexpire(`${p}project:${reg.canonicalId}`, retain)
        .exec();
      return true;
    },
    get: load,
    async lastForProject(canonicalId) {
      const id = await redis.get(`${p}project:${canonicalId}`);
      return id ? load(id) : undefined;
    },
    async forProject(canonicalId) {
      const s = await registry.lastForProject(canonicalId);
      return s?.connectionState === "connected" ? s : undefined;
    },
    async list() {
      const ids = await redis.smembers(`${p}runners`);
      const states = await Promise.all(ids.map(load));
      const gone = ids.filter((_, i) => states[i] === undefined);
      if (gone.length > 0) await redis.srem(`${p}runners`, ...gone);
      return states.filter((s): s is RunnerState => s !== undefined);
    },
    async forgetProject(canonicalId) {
      const id = await redis.get(`${p}project:${canonicalId}`);
      const multi = redis.multi().del(`${p}project:${canonicalId}`);
      if (id) multi.del(`${p}runner:${id}`, `${p}alive:${id}`).srem(`${p}runners`, id);
      await multi.exec();
    },
  };
  return registry;
}
