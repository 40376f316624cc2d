/**
 * Whether a Host declared the MCP Apps extension (`io.modelcontextprotocol/ui` with the
 * `text/html;profile=mcp-app` MIME type) when it initialized. The gateway keeps no session
 * state, so the answer travels in the Mcp-Session-Id it issues: `<uuid>.<a|g>.<mac>`, where the
 * HMAC binds the flag to the caller. A forged, foreign or missing id reads as "not declared".
 */
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import { getUiCapability, RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/server";

export interface AppSessions {
  /** The Mcp-Session-Id for an initialize with these client capabilities. */
  issue(callerKey: string, clientCapabilities: unknown): string;
  /** True when the id was issued to this caller for a Host that declared the extension. */
  declaredApp(sessionId: string | undefined, callerKey: string): boolean;
}

/** Whether initialize capabilities declare MCP Apps with the HTML profile. */
export function declaresApps(clientCapabilities: unknown): boolean {
  if (typeof clientCapabilities !== "object" || clientCapabilities === null) return false;
  const ui = getUiCapability(clientCapabilities as Parameters<typeof getUiCapability>[0]);
  return ui?.mimeTypes?.includes(RESOURCE_MIME_TYPE) === true;
}

/** `key` is shared by gateway replicas (WEBCODEX_MCP_SESSION_KEY); without one, a per-process key. */
export function createAppSessions(key?: string): AppSessions {
  const secret = key !== undefined && key !== "" ? Buffer.from(key, "utf8") : randomBytes(32);
  const mac = (id: string, flag: string, callerKey: string) =>
    createHmac("sha256", secret).update(`${id}\u0000${flag}\u0000${callerKey}`).digest("base64url").slice(0, 22);
  return {
    issue(callerKey, capabilities) {
      const id = randomUUID();
      const flag = declaresApps(capabilities) ? "a" : "g";
      return `${id}.${flag}.${mac(id, flag, callerKey)}`;
    },
    declaredApp(sessionId, callerKey) {
      const [id, flag, tag, extra] = (sessionId ?? "").split(".");
      if (!id || flag !== "a" || !tag || extra !== undefined) return false;
      const expected = Buffer.from(mac(id, flag, callerKey));
      const given = Buffer.from(tag);
      return given.length === expected.length && timingSafeEqual(given, expected);
    },
  };
}
