/**
 * Bearer-token authentication. Every request needs a token: a JWT access token from the
 * configured authorization server (auth/jwt.ts), or a static dev token from a file mapping
 * tokens to principals. Tokens are compared in constant time and never logged or forwarded.
 */
import { hash, timingSafeEqual } from "node:crypto";
import type { Principal } from "@webcodex/platform";
import { isHostProfile } from "@webcodex/contracts";
import type { AdmissionProfile, HostProfile } from "@webcodex/contracts";

export interface Caller {
  principal: Principal;
  admissionProfile: AdmissionProfile;
  /** The OAuth client the token was issued to (client_id or azp claim), for the tool policy's client rules. */
  oauthClientId?: string;
  /** The Host profile this principal's token names; absent: the gateway's WEBCODEX_HOST_PROFILE. */
  hostProfile?: HostProfile;
  scopes: string[];
}

export interface Authenticator {
  /**
   * The caller for a bearer token, or undefined when the token is missing or not valid.
   * Throws AuthUnavailableError when validity could not be decided (e.g. the authorization
   * server's keys cannot be fetched): the HTTP layer answers 503, not 401, so Hosts keep
   * their tokens.
   */
  authenticate(token: string | undefined): Promise<Caller | undefined>;
}

/** The token could not be checked now; it may be valid. Never carries the token. */
export class AuthUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "AuthUnavailableError";
  }
}

/** Dev tokens get both scopes unless the file narrows them. */
const DEFAULT_STATIC_SCOPES: readonly string[] = ["webcodex:read", "webcodex:write"];

export interface StaticTokenEntry {
  token: string;
  clientId: string;
  subject: string;
  /** The tenant admin role: may change any of the tenant's Projects' settings. */
  tenantAdmin?: boolean;
  admissionProfile?: AdmissionProfile;
  /** The OAuth client this token stands for (the tool policy's client rules). */
  oauthClientId?: string;
  /** The Host this token is for (e.g. "app" for an MCP App Host); default: the gateway's. */
  hostProfile?: HostProfile;
  scopes?: string[];
}

const digest = (s: string) => hash("sha256", s, "buffer");

export function createStaticTokenAuthenticator(entries: readonly StaticTokenEntry[]): Authenticator {
  const table = entries.map((e) => ({
    hash: digest(e.token),
    caller: {
      principal: e.tenantAdmin ? { clientId: e.clientId, subject: e.subject, tenantAdmin: true } : { clientId: e.clientId, subject: e.subject },
      admissionProfile: e.admissionProfile ?? "full",
      ...(e.oauthClientId !== undefined ? { oauthClientId: e.oauthClientId } : {}),
      ...(e.hostProfile ? { hostProfile: e.hostProfile } : {}),
      scopes: [...(e.scopes ?? DEFAULT_STATIC_SCOPES)],
    } satisfies Caller,
  }));
  return {
    async authenticate(token) {
      if (!token) return undefined;
      const h = digest(token);
      for (const entry of table) if (timingSafeEqual(entry.hash, h)) return entry.caller;
      return undefined;
    },
  };
}

/**
 * Tries each authenticator in order; the first that knows the token wins. If none does and
 * one could not decide (AuthUnavailableError), that error is thrown.
 */
export function createChainAuthenticator(authenticators: readonly Authenticator[]): Authenticator {
  return {
    async authenticate(token) {
      if (!token) return undefined;
      let unavailable: unknown;
      for (const a of authenticators) {
        try {
          const caller = await a.authenticate(token);
          if (caller) return caller;
        } catch (error) {
          if (!(error instanceof AuthUnavailableError)) throw error;
          unavailable = error;
        }
      }
      if (unavailable !== undefined) throw unavailable;
      return undefined;
    },
  };
}

export function bearerToken(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  const m = value ? /^Bearer\s+(\S+)\s*$/i.exec(value) : null;
  return m?.[1];
}
