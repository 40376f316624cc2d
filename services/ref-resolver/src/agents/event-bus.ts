/**
 * Wakes waiters of an Agent's event log. Appends call `notify` after their transaction commits
 * (in-process waiters, embedded mode); in distributed mode every replica also LISTENs on the
 * Postgres channel the appending transaction NOTIFYs, so a waiter on another replica wakes too.
 * A wake in process carries the events the committed transaction appended: a waiter whose
 * cursor they continue exactly answers with them, without reading the log again. Any other
 * wake (a NOTIFY from another replica, events that do not continue its cursor) is only a hint:
 * the waiter re-reads the log from its exact cursor.
 */
import { EventEmitter } from "node:events";
import pg from "pg";
import type { Logger } from "@webcodex/platform";

export const AGENT_EVENTS_CHANNEL = "webcodex_agent_events";

/** One committed event as its log row reads. */
export interface AppendedEvent {
  seq: string;
  kind: string;
  task_id: string | null;
  attempt_id: string | null;
  at: Date | string;
}

export type AgentEventWake = { how: "notified"; events?: readonly AppendedEvent[] } | { how: "timeout" };

export interface AgentEventBus {
  /** `events`: what was appended to the Agent's log, in order, once committed (in-process appends only). */
  notify(agentId: string, events?: readonly AppendedEvent[]): void;
  /** Resolves on the next notify for `agentId`, after `ms`, or on abort, whichever is first. */
  wait(agentId: string, ms: number, signal?: AbortSignal): Promise<AgentEventWake>;
  close(): Promise<void>;
}

export function createAgentEventBus(): AgentEventBus & { emitter: EventEmitter } {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  return {
    emitter,
    notify(agentId, events) {
      emitter.emit(agentId, events);
    },
    wait(agentId, ms, signal) {
      return new Promise((resolve) => {
        let timer: NodeJS.Timeout | undefined;
        const done = (wake: AgentEventWake) => {
          if (timer) clearTimeout(timer);
          emitter.off(agentId, onNotify);
          signal?.removeEventListener("abort", onAbort);
          resolve(wake);
        };
        const onNotify = (events?: readonly AppendedEvent[]) => done(events ? { how: "notified", events } : { how: "notified" });
        const onAbort = () => done({ how: "timeout" });
        emitter.on(agentId, onNotify);
        signal?.addEventListener("abort", onAbort, { once: true });
        timer = setTimeout(() => done({ how: "timeout" }), ms);
        if (signal?.aborted) done({ how: "timeout" });
      });
    },
    async close() {
      emitter.removeAllListeners();
    },
  };
}

/**
 * The NOTIFY payload: the committed event as JSON ({agent_id, seq, kind, task_id, attempt_id,
 * at}), or (older appenders) the bare agent id, which only wakes.
 */
export function parseAgentEventNotification(payload: string): { agentId: string; event?: AppendedEvent } | undefined {
  if (!payload.startsWith("{")) return payload ? { agentId: payload } : undefined;
  try {
    const n = JSON.parse(payload) as Partial<Record<keyof AppendedEvent | "agent_id", unknown>>;
    if (typeof n.agent_id !== "string") return undefined;
    const ok =
      typeof n.seq === "string" &&
      typeof n.kind === "string" &&
      typeof n.at === "string" &&
      (n.task_id === null || typeof n.task_id === "string") &&
      (n.attempt_id === null || typeof n.attempt_id === "string");
    return ok
      ? {
          agentId: n.agent_id,
          event: {
            seq: n.seq as string,
            kind: n.kind as string,
            task_id: n.task_id as string | null,
            attempt_id: n.attempt_id as string | null,
            at: n.at as string,
          },
        }
      : { agentId: n.agent_id };
  } catch {
    return undefined;
  }
}

/**
 * A bus that also hears other replicas: one dedicated connection LISTENs on the channel and
 * reconnects after a loss (a waiter still wakes at its deadline and re-reads, so a missed
 * notification costs latency, never an event). A notification is delivered only once its
 * transaction committed, so the event it carries is handed to waiters like an in-process one.
 */
export function createPostgresAgentEventBus(url: string, logger: Logger): AgentEventBus {
  const bus = createAgentEventBus();
  let client: pg.Client | undefined;
  let closed = false;
  const connect = async (): Promise<void> => {
    if (closed) return;
    const c = new pg.Client({ connectionString: url });
    c.on("notification", (n) => {
      const heard = n.channel === AGENT_EVENTS_CHANNEL && n.payload ? parseAgentEventNotification(n.payload) : undefined;
      if (heard) bus.notify(heard.agentId, heard.event ? [heard.event] : undefined);
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
