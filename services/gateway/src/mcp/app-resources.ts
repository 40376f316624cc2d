/**
 * The MCP App resources (`ui://webcodex/…`, `text/html;profile=mcp-app`) behind the
 * presentation tools: one self-contained HTML document each, built by
 * tools/scripts/build-cards.mjs into dist/cards/. Offered only to Hosts that declared the
 * MCP Apps extension. The CSP in `_meta.ui` allows no network origin at all. A card (about
 * 1 MiB each) is read from disk when a Host reads it, not held by an idle server.
 */
import { access, readFile } from "node:fs/promises";
import { RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/server";
import { toolDefinitions } from "@webcodex/contracts";
import type { Logger } from "@webcodex/platform";

export interface AppResource {
  uri: string;
  name: string;
  /** The built HTML document. */
  file: URL;
}

/** No connect, resource, frame or base-uri origins: the card talks only to its Host. */
export const CARD_UI_META = { csp: { connectDomains: [], resourceDomains: [], frameDomains: [], baseUriDomains: [] }, prefersBorder: true } as const;

/** Finds the built card of every implemented tool that names one; a missing build is logged and left out. */
export async function loadAppResources(logger: Logger): Promise<Map<string, AppResource>> {
  const out = new Map<string, AppResource>();
  for (const def of toolDefinitions()) {
    if (!def.implemented || def.appResource === undefined) continue;
    const file = def.appResource.replace(/^ui:\/\/webcodex\//, "");
    const url = new URL(`../cards/${file}`, import.meta.url);
    try {
      await access(url);
      out.set(def.appResource, { uri: def.appResource, name: def.name, file: url });
    } catch (error) {
      logger.warn("MCP App card not built; run make build", { uri: def.appResource, error: String(error) });
    }
  }
  return out;
}

export function resourcesListResult(resources: ReadonlyMap<string, AppResource>) {
  return {
    resources: [...resources.values()].map((r) => ({ uri: r.uri, name: r.name, mimeType: RESOURCE_MIME_TYPE, _meta: { ui: CARD_UI_META } })),
  };
}

export async function resourceReadResult(resource: AppResource) {
  const html = await readFile(resource.file, "utf8");
  return { contents: [{ uri: resource.uri, mimeType: RESOURCE_MIME_TYPE, text: html, _meta: { ui: CARD_UI_META } }] };
}
