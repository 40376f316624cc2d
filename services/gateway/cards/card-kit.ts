/**
 * Shared pieces of the WebCodex MCP App cards. Everything shown comes from tool input and
 * results and is put into the page as text nodes: nothing from a workspace is ever parsed as
 * markup.
 */
import { App } from "@modelcontextprotocol/ext-apps";

export type Json = Record<string, unknown>;

/** An element with text content (never innerHTML) and optional class and test id. */
export function el(tag: string, text?: string, options: { cls?: string; id?: string } = {}): HTMLElement {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (options.cls) node.className = options.cls;
  if (options.id) node.dataset["testid"] = options.id;
  return node;
}

export function replace(root: HTMLElement, ...children: HTMLElement[]): void {
  root.replaceChildren(...children);
}

/** A labelled fact line: "label: value". */
export function fact(label: string, value: string, id: string): HTMLElement {
  const row = el("div", undefined, { cls: "fact" });
  row.append(el("span", `${label}: `, { cls: "label" }), el("span", value, { id }));
  return row;
}

export interface Card {
  app: App;
  root: HTMLElement;
  input(): Json;
}

/** Connects the card to its Host; `onResult` gets each tool result's structured content. */
export async function startCard(name: string, onResult: (card: Card, result: Json, isError: boolean) => void): Promise<Card> {
  const root = document.getElementById("card") as HTMLElement;
  const app = new App({ name, version: "1.0.0" }, {});
  let input: Json = {};
  const card: Card = { app, root, input: () => input };
  app.ontoolinput = (params) => {
    input = (params.arguments ?? {}) as Json;
  };
  app.ontoolresult = (result) => onResult(card, (result.structuredContent ?? {}) as Json, result.isError === true);
  await app.connect();
  return card;
}

/** Renders a structured failure as text. */
export function failureView(result: Json): HTMLElement {
  return el("div", `Failed: ${String(result["reason_code"] ?? "unknown")}${result["message"] ? ` — ${String(result["message"])}` : ""}`, {
    cls: "error",
    id: "error",
  });
}

/** Calls a server tool; its structured content and whether it failed. */
export async function callTool(card: Card, name: string, args: Json): Promise<{ view: Json; isError: boolean }> {
  const r = await card.app.callServerTool({ name, arguments: args });
  return { view: (r.structuredContent ?? {}) as Json, isError: r.isError === true };
}

/** The fact lines every continuation card shows about its dispatch. */
export function continuationFacts(view: Json): HTMLElement[] {
  const c = (view["continuation"] ?? {}) as Json;
  return [
    fact("continuation dispatch", String(c["dispatch"]), "dispatch"),
    fact("fresh turn", String(c["fresh_turn"]).replace("_", " "), "fresh-turn"),
    fact("consumed", c["consumed"] === true ? "yes" : "no", "consumed"),
    fact("unattended continuation", String(c["unattended_continuation"]), "unattended"),
  ];
}

/** The text of a continuation's ui/message: what happened, then the exact call to continue with. */
export function continuationMessage(what: string, view: Json): string {
  const followUp = (view["continuation"] as Json)["follow_up"] as Json;
  return `${what} Continue with exactly this call:\n${JSON.stringify({ tool: followUp["tool"], arguments: followUp["arguments"] })}`;
}

/**
 * One continuation card's server record: `read` re-reads it, `update` claims and settles its
 * dispatch; `target` names it in both.
 */
export interface ContinuationRecord {
  card: Card;
  read: string;
  update: string;
  target: Json;
  render(view: Json): void;
}

const POLL_MS = 1000;
let pollTimer: ReturnType<typeof setTimeout> | undefined;

/** Re-reads the record after a second and hands the answer on (a failure replaces the card). */
export function pollAgain(record: ContinuationRecord, onView: (view: Json) => Promise<void>, last: Json): void {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(() => {
    callTool(record.card, record.read, record.target)
      .then((r) => (r.isError ? replace(record.card.root, failureView(r.view)) : onView(r.view)))
      .catch(() => void onView(last));
  }, POLL_MS);
}

/**
 * Sends the continuation's one ui/message: claimed on the server first (claimed elsewhere: the
 * record is shown as it stands and nothing is sent), then the Host's answer is recorded as
 * accepted, rejected or uncertain.
 */
export async function dispatchContinuation(record: ContinuationRecord, text: (claimed: Json) => string): Promise<void> {
  const { card, target } = record;
  const claim = await callTool(card, record.update, { ...target, step: "claim" });
  if (claim.isError) {
    const now = await callTool(card, record.read, target);
    if (!now.isError) record.render(now.view);
    return;
  }
  let step: "accepted" | "rejected" | "uncertain";
  try {
    const answer = await card.app.sendMessage({ role: "user", content: [{ type: "text", text: text(claim.view) }] });
    step = answer.isError === true ? "rejected" : "accepted";
  } catch {
    step = "uncertain";
  }
  const receipt = await callTool(card, record.update, { ...target, step });
  if (!receipt.isError) record.render(receipt.view);
}
