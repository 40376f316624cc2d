/**
 * Leader election over a coordination.k8s.io/v1 Lease: one broker replica reconciles the
 * fleet, every replica serves calls. The holder renews every `renewMs`; another replica takes
 * the Lease once `renewTime + leaseDurationSeconds` has passed (or the holder released it), with
 * an optimistic replace (the resourceVersion read), so two replicas never both win a round.
 * A holder that could not renew for `renewDeadlineMs` (shorter than the lease duration) stops
 * leading on its own clock, before any other replica may take over: `isLeader()` turns false
 * before the next write of a reconcile pass.
 */
import type { KubeConfig, V1Lease } from "@kubernetes/client-node";
import type { Logger } from "@webcodex/platform";

export interface LeaderElectorOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** The Lease's name (one per release). */
  name: string;
  /** This replica (pod name); must differ between replicas. */
  identity: string;
  /** Default 15 s. */
  leaseDurationMs?: number;
  /** Default 5 s. */
  renewMs?: number;
  /** Default two thirds of the lease duration. */
  renewDeadlineMs?: number;
  now?: () => number;
  logger: Logger;
  onStartedLeading?: () => void;
  onStoppedLeading?: () => void;
}

export interface LeaderElector {
  readonly identity: string;
  /** True while this replica holds a Lease it renewed within the renew deadline. */
  isLeader(): boolean;
  /** One acquire-or-renew round; resolves with whether this replica leads after it. */
  tryAcquireOrRenew(): Promise<boolean>;
  /** Runs rounds every renewMs until stop(). */
  start(): void;
  /** Stops the rounds and, when leading, releases the Lease so another replica takes over at once. */
  stop(): Promise<void>;
}

/** RFC 3339 with microseconds, as the API server's MicroTime expects. */
const microTime = (ms: number) => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
const timeMs = (t: unknown) => (t instanceof Date ? t.getTime() : typeof t === "string" ? Date.parse(t) : NaN);

export async function createLeaderElector(o: LeaderElectorOptions): Promise<LeaderElector> {
  const { ApiException, CoordinationV1Api } = await import("@kubernetes/client-node");
  const api = o.kubeConfig.makeApiClient(CoordinationV1Api);
  const now = o.now ?? Date.now;
  const leaseDurationMs = o.leaseDurationMs ?? 15_000;
  const renewMs = o.renewMs ?? 5_000;
  const renewDeadlineMs = o.renewDeadlineMs ?? Math.floor((leaseDurationMs * 2) / 3);
  const status = (e: unknown) => (e instanceof ApiException ? e.code : undefined);
  let leading = false;
  let lastRenewMs = 0;
  let timer: NodeJS.Timeout | undefined;
  let round: Promise<boolean> | undefined;
  let stopped = false;

  const setLeading = (v: boolean) => {
    if (v === leading) return;
    leading = v;
    o.logger.info(v ? "fleet leader: this replica reconciles" : "fleet leader: this replica stopped reconciling", { lease: o.name, identity: o.identity });
    (v ? o.onStartedLeading : o.onStoppedLeading)?.();
  };

  const spec = (transitions: number, acquireMs: number) => ({
    holderIdentity: o.identity,
    leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
    acquireTime: microTime(acquireMs) as unknown as Date,
    renewTime: microTime(now()) as unknown as Date,
    leaseTransitions: transitions,
  });

  const once = async (): Promise<boolean> => {
    const t = now();
    try {
      let lease: V1Lease | undefined;
      try {
        lease = await api.readNamespacedLease({ name: o.name, namespace: o.namespace });
      } catch (e) {
        if (status(e) !== 404) throw e;
      }
      if (!lease) {
        await api.createNamespacedLease({
          namespace: o.namespace,
          body: { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: o.name, namespace: o.namespace }, spec: spec(0, t) },
        });
        lastRenewMs = t;
        setLeading(true);
        return true;
      }
      const s = lease.spec ?? {};
      const holder = s.holderIdentity ?? "";
      const expiresMs = timeMs(s.renewTime) + (s.leaseDurationSeconds ?? 0) * 1000;
      const mine = holder === o.identity;
      if (!mine && holder !== "" && !(expiresMs < t)) {
        setLeading(false);
        return false;
      }
      const transitions = (s.leaseTransitions ?? 0) + (mine ? 0 : 1);
      const acquiredMs = mine ? timeMs(s.acquireTime) || t : t;
      await api.replaceNamespacedLease({
        name: o.name,
        namespace: o.namespace,
        body: { ...lease, spec: spec(transitions, acquiredMs) },
      });
      if (!mine) o.logger.info("fleet leader: took over the lease", { lease: o.name, identity: o.identity, previous: holder || "(released)" });
      lastRenewMs = t;
      setLeading(true);
      return true;
    } catch (e) {
      // 409: another replica wrote the Lease first; this round is lost. Anything else: keep
      // leading only until the renew deadline passes.
      if (status(e) === 409 || now() - lastRenewMs >= renewDeadlineMs) setLeading(false);
      if (status(e) !== 409) o.logger.warn("fleet leader: lease round failed", { lease: o.name, error: e });
      return leading && now() - lastRenewMs < renewDeadlineMs;
    }
  };

  const elector: LeaderElector = {
    identity: o.identity,
    isLeader: () => {
      if (leading && now() - lastRenewMs >= renewDeadlineMs) setLeading(false);
      return leading;
    },
    tryAcquireOrRenew() {
      round ??= once().finally(() => (round = undefined));
      return round;
    },
    start() {
      stopped = false;
      const tick = () => {
        if (stopped) return;
        void elector.tryAcquireOrRenew().finally(() => {
          if (!stopped) timer = setTimeout(tick, renewMs);
        });
      };
      tick();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await round?.catch(() => undefined);
      if (!leading) return;
      setLeading(false);
      try {
        const lease = await api.readNamespacedLease({ name: o.name, namespace: o.namespace });
        if (lease.spec?.holderIdentity === o.identity) {
          await api.replaceNamespacedLease({
            name: o.name,
            namespace: o.namespace,
            body: { ...lease, spec: { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1 } },
          });
        }
      } catch (e) {
        o.logger.warn("fleet leader: lease release failed (it lapses after its duration)", { lease: o.name, error: e });
      }
    },
  };
  return elector;
}
