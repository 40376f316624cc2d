/**
 * Agent continuation card: shows the Agent's pending events live; once events are pending it
 * sends exactly one ui/message asking the Host for a fresh turn with the exact
 * wait_for_agent_events call (through call_runtime_tool). The message is claimed on the server
 * before it is sent, and the Host's answer is recorded; a claimed or uncertain dispatch is
 * never sent again (not by this card, nor by a remount).
 */
import { continuationFacts, continuationMessage, dispatchContinuation, el, fact, failureView, pollAgain, replace, startCard } from "./card-kit.js";
import type { Card, ContinuationRecord, Json } from "./card-kit.js";

let dispatching = false;

function render(card: Card, view: Json): void {
  const events = (view["pending_events"] ?? []) as Json[];
  const list = el("ul", undefined, { id: "events" });
  for (const e of events) list.append(el("li", `${String(e["kind"])}${e["task_id"] ? ` ${String(e["task_id"])}` : ""}`, { cls: "event" }));
  replace(
    card.root,
    el("h2", `Agent ${String(view["agent_id"])}`),
    fact("pending events", String(view["pending_count"]), "pending-count"),
    list,
    ...continuationFacts(view),
  );
}

async function advance(card: Card, view: Json): Promise<void> {
  render(card, view);
  const record: ContinuationRecord = {
    card,
    read: "read_agent_continuation",
    update: "update_agent_continuation",
    target: {
      agent_id: view["agent_id"],
      endpoint_id: view["endpoint_id"],
      expected_controller_generation: view["controller_generation"],
      after_cursor: view["after_cursor"],
    },
    render: (v) => render(card, v),
  };
  if ((view["continuation"] as Json)["dispatch"] !== "none" || dispatching) return;
  if (Number(view["pending_count"]) === 0) return pollAgain(record, (v) => advance(card, v), view);
  dispatching = true;
  await dispatchContinuation(record, (claimed) =>
    continuationMessage(`Agent ${String(claimed["agent_id"])} has ${String(claimed["pending_count"])} new event(s).`, claimed),
  );
}

void startCard("webcodex-agent-continuation", (card, result, isError) => {
  if (isError) return replace(card.root, failureView(result));
  void advance(card, result);
});
