/**
 * The admitted catalog per (admission profile, Host profile), fetched from the tool-registry
 * and cached. Static tool facts come from the same @webcodex/contracts catalog the registry
 * serves, so the gateway never keeps a second table.
 */
import type { Client } from "@connectrpc/connect";
import type { ToolRegistryService } from "@webcodex/proto";
import { listedTools, toolDefinition, toolsListResult } from "@webcodex/contracts";
import type { AdmissionProfile, HostProfile, ToolDefinition } from "@webcodex/contracts";

export interface AdmittedCatalog {
  version: string;
  admitted: ReadonlyMap<string, ToolDefinition>;
  /** Direct tools by rank, then the gateway entry points: what MCP tools/list shows. */
  listed: readonly ToolDefinition[];
  /** The serialized MCP tools/list result, built once per catalog version. */
  toolsListResult: { tools: Array<Record<string, unknown>> };
}

export interface CatalogCache {
  get(admission: AdmissionProfile, host: HostProfile): Promise<AdmittedCatalog>;
}

export function createCatalogCache(registry: Client<typeof ToolRegistryService>, options: { ttlMs: number }): CatalogCache {
  const entries = new Map<string, { at: number; value: Promise<AdmittedCatalog> }>();
  const load = async (admission: AdmissionProfile, host: HostProfile): Promise<AdmittedCatalog> => {
    const res = await registry.getAdmittedCatalog({ admissionProfile: admission, hostProfile: host });
    const admitted = new Map<string, ToolDefinition>();
    for (const t of res.tools) {
      const def = toolDefinition(t.name);
      if (def) admitted.set(def.name, def);
    }
    const selection = [...admitted.values()];
    return { version: res.catalogVersion, admitted, listed: listedTools(selection, host), toolsListResult: toolsListResult(selection, host) };
  };
  return {
    get(admission, host) {
      const key = `${admission}/${host}`;
      const now = Date.now();
      const hit = entries.get(key);
      if (hit && now - hit.at < options.ttlMs) return hit.value;
      const value = load(admission, host);
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
