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
