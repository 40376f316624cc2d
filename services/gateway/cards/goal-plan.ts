/** Goal plan card: the goal and its steps with states, and the plan's revision. Display only. */
import { el, failureView, replace, startCard } from "./card-kit.js";
import type { Json } from "./card-kit.js";

void startCard("webcodex-goal-plan", (card, result, isError) => {
  if (isError) return replace(card.root, failureView(result));
  const input = card.input();
  const list = el("ol", undefined, { id: "steps" });
  for (const s of (input["steps"] ?? []) as Json[]) {
    const item = el("li", undefined, { cls: `step ${String(s["state"])}` });
    item.append(el("span", String(s["state"]).replace("_", " "), { cls: "badge" }), el("span", ` ${String(s["title"])}`, { cls: "step-title" }));
    list.append(item);
  }
  replace(card.root, el("h2", String(input["goal"] ?? ""), { id: "goal" }), el("div", `revision ${String(result["revision"])}`, { id: "revision" }), list);
});
