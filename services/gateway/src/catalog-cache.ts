/**
 * The admitted catalog per (admission profile, Host profile), fetched from the tool-registry
 * and cached. Static tool facts come from the same @webcodex/contracts catalog the registry
 * serves, so the gateway never keeps a second table.
 */
import type { Client } from "@connectrpc/connect";
import type { ToolRegistryService } from "@webcodex/proto";
import { listedTools, toolDefinition, toolsListResult } from "@webcodex/contracts";
import type { HostProfile, ToolDefinition } from "@webcodex/contracts";
import type { Caller } from "./auth.js";

export interface AdmittedCatalog {
  version: string;
  admitted: ReadonlyMap<string, ToolDefinition>;
  /** Direct tools by rank, then the gateway entry points: what MCP tools/list shows. */
  listed: readonly ToolDefinition[];
  /** The serialized MCP tools/list result, built once per catalog version. */
  toolsListResult: { tools: Array<Record<string, unknown>> };
  /** Tools the operator's tool policy withholds from this caller: to them, unknown names. */
  withheld?: ReadonlySet<string>;
}

/** What admission depends on: the profile, the tenant and the OAuth client (the tool policy's subjects). */
export type CatalogCaller = Pick<Caller, "admissionProfile" | "oauthClientId"> & { principal: Pick<Caller["principal"], "clientId"> };

export interface CatalogCache {
  get(caller: CatalogCaller, host: HostProfile): Promise<AdmittedCatalog>;
  /** Asks the registry without touching the cache (MCP initialize: once per session, off the call path). */
  fresh?(caller: CatalogCaller, host: HostProfile): Promise<AdmittedCatalog>;
}

/** Catalogs kept at most (one per tenant, client and profile seen); the oldest goes first. */
const MAX_ENTRIES = 10_000;

export function createCatalogCache(registry: Client<typeof ToolRegistryService>, options: { ttlMs: number }): CatalogCache {
  const entries = new Map<string, { at: number; value: Promise<AdmittedCatalog> }>();
  const load = async (caller: CatalogCaller, host: HostProfile): Promise<AdmittedCatalog> => {
    const res = await registry.getAdmittedCatalog({
      admissionProfile: caller.admissionProfile,
      hostProfile: host,
      tenant: caller.principal.clientId,
      oauthClient: caller.oauthClientId ?? "",
    });
    const admitted = new Map<string, ToolDefinition>();
    for (const t of res.tools) {
      const def = toolDefinition(t.name);
      if (def) admitted.set(def.name, def);
    }
    const selection = [...admitted.values()];
    return {
      version: res.catalogVersion,
      admitted,
      listed: listedTools(selection, host),
      toolsListResult: toolsListResult(selection, host),
      ...(res.withheldTools.length > 0 ? { withheld: new Set(res.withheldTools) } : {}),
    };
  };
  return {
    fresh: load,
    get(caller, host) {
      const key = JSON.stringify([caller.admissionProfile, host, caller.principal.clientId, caller.oauthClientId ?? ""]);
      const now = Date.now();
      const hit = entries.get(key);
      if (hit && now - hit.at < options.ttlMs) return hit.value;
      const value = load(caller, host);
      entries.delete(key);
      if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value as string);
      entries.set(key, { at: now, value });
      // A failed load is not cached; a stale-but-good one keeps serving while the registry is down.
      value.catch(() => {
        if (entries.get(key)?.value === value) {
          if (hit) entries.set(key, { at: now - options.ttlMs + 1_000, value: hit.value });
          else entries.delete(key);
        }
      });
      return hit ? value.catch(() => hit.value) : value;
    },
  };
}
