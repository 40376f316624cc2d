/**
 * Wakes waiters of an Agent's event log. Appends call `notify` after their transaction commits
 * (in-process waiters, embedded mode); in distributed mode every replica also LISTENs on the
 * Postgres channel the appending transaction NOTIFYs, so a waiter on another replica wakes too.
 * A wake is only a hint: the waiter always re-reads the log from its exact cursor.
 */
import { EventEmitter } from "node:events";
import pg from "pg";
import type { Logger } from "@webcodex/platform";

export const AGENT_EVENTS_CHANNEL = "webcodex_agent_events";

export interface AgentEventBus {
  notify(agentId: string): void;
  /** Resolves on the next notify for `agentId`, after `ms`, or on abort, whichever is first. */
  wait(agentId: string, ms: number, signal?: AbortSignal): Promise<"notified" | "timeout">;
  close(): Promise<void>;
}

export function createAgentEventBus(): AgentEventBus & { emitter: EventEmitter } {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  return {
    emitter,
    notify(agentId) {
      emitter.emit(agentId);
    },
    wait(agentId, ms, signal) {
      return new Promise((resolve) => {
        let timer: NodeJS.Timeout | undefined;
        const done = (how: "notified" | "timeout") => {
          if (timer) clearTimeout(timer);
          emitter.off(agentId, onNotify);
          signal?.removeEventListener("abort", onAbort);
          resolve(how);
        };
        const onNotify = () => done("notified");
        const onAbort = () => done("timeout");
        emitter.on(agentId, onNotify);
        signal?.addEventListener("abort", onAbort, { once: true });
        timer = setTimeout(() => done("timeout"), ms);
        if (signal?.aborted) done("timeout");
      });
    },
    async close() {
      emitter.removeAllListeners();
    },
  };
}

/**
 * A bus that also hears other replicas: one dedicated connection LISTENs on the channel and
 * reconnects after a loss (a waiter still wakes at its deadline and re-reads, so a missed
 * notification costs latency, never an event).
 */
export function createPostgresAgentEventBus(url: string, logger: Logger): AgentEventBus {
  const bus = createAgentEventBus();
  let client: pg.Client | undefined;
  let closed = false;
  const connect = async (): Promise<void> => {
    if (closed) return;
    const c = new pg.Client({ connectionString: url });
    c.on("notification", (n) => {
      if (n.channel === AGENT_EVENTS_CHANNEL && n.payload) bus.notify(n.payload);
    });
    c.on("error", () => {
      // Reported by "end"; reconnect there.
    });
    c.on("end", () => {
      if (client === c) client = undefined;
      if (!closed) setTimeout(() => void connect().catch(() => undefined), 500).unref();
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${AGENT_EVENTS_CHANNEL}`);
      client = c;
    } catch (error) {
      logger.warn("agent event listener not connected; retrying", { error: (error as Error).message });
      await c.end().catch(() => undefined);
    }
  };
  void connect();
  return {
    notify: bus.notify,
    wait: bus.wait,
    async close() {
      closed = true;
      await client?.end().catch(() => undefined);
      await bus.close();
    },
  };
}
