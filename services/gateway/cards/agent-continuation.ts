/**
 * Agent continuation card: shows the Agent's pending events live; once events are pending it
 * sends exactly one ui/message asking the Host for a fresh turn with the exact
 * wait_for_agent_events call (through call_runtime_tool). The message is claimed on the server
 * before it is sent, and the Host's answer is recorded; a claimed or uncertain dispatch is
 * never sent again (not by this card, nor by a remount).
 */
import { el, fact, failureView, replace, startCard } from "./card-kit.js";
import type { Card, Json } from "./card-kit.js";

const POLL_MS = 1000;
let dispatching = false;
let timer: ReturnType<typeof setTimeout> | undefined;

function render(card: Card, view: Json): void {
  const c = (view["continuation"] ?? {}) as Json;
  const events = (view["pending_events"] ?? []) as Json[];
  const list = el("ul", undefined, { id: "events" });
  for (const e of events) list.append(el("li", `${String(e["kind"])}${e["task_id"] ? ` ${String(e["task_id"])}` : ""}`, { cls: "event" }));
  replace(
    card.root,
    el("h2", `Agent ${String(view["agent_id"])}`),
    fact("pending events", String(view["pending_count"]), "pending-count"),
    list,
    fact("continuation dispatch", String(c["dispatch"]), "dispatch"),
    fact("fresh turn", String(c["fresh_turn"]).replace("_", " "), "fresh-turn"),
    fact("consumed", c["consumed"] === true ? "yes" : "no", "consumed"),
    fact("unattended continuation", String(c["unattended_continuation"]), "unattended"),
  );
}

function message(view: Json): string {
  const followUp = (view["continuation"] as Json)["follow_up"] as Json;
  return `Agent ${String(view["agent_id"])} has ${String(view["pending_count"])} new event(s). Continue with exactly this call:\n${JSON.stringify({ tool: followUp["tool"], arguments: followUp["arguments"] })}`;
}

async function call(card: Card, name: string, args: Json): Promise<{ view: Json; isError: boolean }> {
  const r = await card.app.callServerTool({ name, arguments: args });
  return { view: (r.structuredContent ?? {}) as Json, isError: r.isError === true };
}

async function advance(card: Card, view: Json): Promise<void> {
  render(card, view);
  const target = {
    agent_id: view["agent_id"],
    endpoint_id: view["endpoint_id"],
    expected_controller_generation: view["controller_generation"],
    after_cursor: view["after_cursor"],
  };
  const c = view["continuation"] as Json;
  if (c["dispatch"] !== "none" || dispatching) return;
  if (Number(view["pending_count"]) === 0) {
    clearTimeout(timer);
    timer = setTimeout(() => {
      call(card, "read_agent_continuation", target)
        .then((r) => (r.isError ? replace(card.root, failureView(r.view)) : advance(card, r.view)))
        .catch(() => void advance(card, view));
    }, POLL_MS);
    return;
  }
  dispatching = true;
  const claim = await call(card, "update_agent_continuation", { ...target, step: "claim" });
  if (claim.isError) {
    // Claimed elsewhere: show the record as it stands, send nothing.
    const now = await call(card, "read_agent_continuation", target);
    if (!now.isError) render(card, now.view);
    return;
  }
  let step: "accepted" | "rejected" | "uncertain";
  try {
    const answer = await card.app.sendMessage({ role: "user", content: [{ type: "text", text: message(claim.view) }] });
    step = answer.isError === true ? "rejected" : "accepted";
  } catch {
    step = "uncertain";
  }
  const receipt = await call(card, "update_agent_continuation", { ...target, step });
  if (!receipt.isError) render(card, receipt.view);
}

void startCard("webcodex-agent-continuation", (card, result, isError) => {
  if (isError) return replace(card.root, failureView(result));
  void advance(card, result);
});
