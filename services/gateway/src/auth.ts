/**
 * Bearer-token authentication. Dev mode maps static tokens to principals; every request
 * needs one. Tokens are compared in constant time and never logged or forwarded.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { Principal } from "@webcodex/platform";
import type { AdmissionProfile } from "@webcodex/contracts";

export interface Caller {
  principal: Principal;
  admissionProfile: AdmissionProfile;
  scopes: string[];
}

export interface Authenticator {
  /** The caller for a bearer token, or undefined when the token is missing or not valid. */
  authenticate(token: string | undefined): Promise<Caller | undefined>;
}

export interface StaticTokenEntry {
  token: string;
  clientId: string;
  subject: string;
  admissionProfile?: AdmissionProfile;
  scopes?: string[];
}

const digest = (s: string) => createHash("sha256").update(s).digest();

export function createStaticTokenAuthenticator(entries: readonly StaticTokenEntry[]): Authenticator {
  const table = entries.map((e) => ({ hash: digest(e.token), caller: { principal: { clientId: e.clientId, subject: e.subject }, admissionProfile: e.admissionProfile ?? "full", scopes: e.scopes ?? ["webcodex"] } satisfies Caller }));
  return {
    async authenticate(token) {
      if (!token) return undefined;
      const h = digest(token);
      for (const entry of table) if (timingSafeEqual(entry.hash, h)) return entry.caller;
      return undefined;
    },
  };
}

/** Parses a dev tokens file: `{"tokens": [{"token", "client_id", "subject", "admission_profile"?}]}`. */
export function parseDevTokensFile(text: string): StaticTokenEntry[] {
  const parsed = JSON.parse(text) as { tokens?: Array<Record<string, unknown>> };
  if (!Array.isArray(parsed.tokens)) throw new Error("dev tokens file needs a tokens array");
  return parsed.tokens.map((t, i) => {
    const token = t["token"], clientId = t["client_id"], subject = t["subject"], profile = t["admission_profile"];
    if (typeof token !== "string" || token.length < 16) throw new Error(`tokens[${i}].token must be a string of at least 16 characters`);
    if (typeof clientId !== "string" || typeof subject !== "string") throw new Error(`tokens[${i}] needs client_id and subject`);
    if (profile !== undefined && profile !== "full" && profile !== "read_only") throw new Error(`tokens[${i}].admission_profile must be full or read_only`);
    return { token, clientId, subject, ...(profile ? { admissionProfile: profile } : {}) };
  });
}

export function bearerToken(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  const m = value ? /^Bearer\s+(\S+)\s*$/i.exec(value) : null;
  return m?.[1];
}
