import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createAgentEventBus, parseAgentEventNotification } from "./event-bus.js";

describe("agent event notifications", () => {
  it("carry the committed event, or (older appenders) only the agent id to wake", () => {
    const event = { seq: "7", kind: "attempt_completed", task_id: "wc_task_1", attempt_id: null, at: "2026-01-02T03:04:05.678901+00:00" };
    assert.deepEqual(parseAgentEventNotification(JSON.stringify({ agent_id: "wc_agent_1", ...event })), { agentId: "wc_agent_1", event });
    assert.deepEqual(parseAgentEventNotification("wc_agent_1"), { agentId: "wc_agent_1" });
    assert.deepEqual(
      parseAgentEventNotification(JSON.stringify({ agent_id: "wc_agent_1", seq: 7 })),
      { agentId: "wc_agent_1" },
      "a malformed event only wakes",
    );
    assert.equal(parseAgentEventNotification("{not json"), undefined);
    assert.equal(parseAgentEventNotification(""), undefined);
  });

  it("a wake hands its events to the waiter; a deadline or an abort reports timeout", async () => {
    const bus = createAgentEventBus();
    const events = [{ seq: "1", kind: "task_assigned", task_id: "t", attempt_id: null, at: new Date(0) }];
    const woken = bus.wait("a", 10_000);
    bus.notify("a", events);
    assert.deepEqual(await woken, { how: "notified", events });
    const hinted = bus.wait("a", 10_000);
    bus.notify("a");
    assert.deepEqual(await hinted, { how: "notified" });
    assert.deepEqual(await bus.wait("a", 1), { how: "timeout" });
    const abort = new AbortController();
    const aborted = bus.wait("a", 10_000, abort.signal);
    abort.abort();
    assert.deepEqual(await aborted, { how: "timeout" });
  });
});
