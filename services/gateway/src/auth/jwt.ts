/**
 * OAuth 2.1 resource server: validates JWT access tokens (RFC 9068) with `jose`.
 *
 * A token is accepted only when its signature verifies against the authorization server's
 * JWKS, `iss` is the configured issuer, `aud` names this MCP resource, and it has not
 * expired. Claims map to the principal: the tenant from a configured claim or preset
 * (tenancy.ts; default `client_id`/`azp`), the subject from `sub`, the tenant admin role from
 * a claim/group mapping, scopes from `scope`/`scp`. Tokens are never
 * logged (only jose's error code is) and never forwarded.
 */
import { createHash } from "node:crypto";
import { createRemoteJWKSet, errors, jwtVerify } from "jose";
import type { JWTPayload, JWTVerifyGetKey } from "jose";
import { isHostProfile } from "@webcodex/contracts";
import type { AdmissionProfile } from "@webcodex/contracts";
import type { Logger } from "@webcodex/platform";
import { AuthUnavailableError } from "../auth.js";
import type { Authenticator, Caller } from "../auth.js";
import { createTenancy } from "./tenancy.js";
import type { TenancyOptions } from "./tenancy.js";

export { tenantIdFromClaim } from "./tenancy.js";

export interface JwtAuthenticatorOptions {
  /** Expected `iss`, exactly as the authorization server's metadata spells it. */
  issuer: string;
  /** Expected `aud`: this MCP resource (RFC 8707 resource indicator), e.g. https://host/mcp. */
  audience: string;
  /** JWKS URL; discovered from the issuer's metadata when absent. */
  jwksUrl?: string;
  /** Claim naming the tenant; `client_id`, then `azp` are used when it is absent. */
  clientIdClaim?: string;
  /** Tenant preset and tenant-admin mapping (see tenancy.ts); `clientIdClaim` is its tenant claim. */
  tenancy?: Omit<TenancyOptions, "tenantClaim">;
  /** Claim whose value "read_only" admits the caller read-only. */
  admissionProfileClaim?: string;
  /**
   * Claim naming the caller's Host profile ("generic" or "app"). Absent claim: the gateway's
   * default. Any other value fails closed: the token is refused.
   */
  hostProfileClaim?: string;
  /** Tenants admitted read-only whatever their token says. */
  readOnlyClients?: readonly string[];
  /** Seconds of clock skew tolerated on exp/nbf/iat (default 30). */
  clockToleranceSec?: number;
  /** Signature algorithms accepted (default: the asymmetric JWS algorithms). */
  algorithms?: readonly string[];
  /** A key resolver instead of the remote JWKS (tests, pinned keys). */
  keys?: JWTVerifyGetKey;
  logger?: Logger;
  fetchTimeoutMs?: number;
}

const ASYMMETRIC_ALGS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];
const ACCESS_TOKEN_TYPES = new Set(["at+jwt", "application/at+jwt", "jwt"]);
const SAFE_SUBJECT = /^[\x21-\x7e]{1,256}$/;

function subjectFromClaim(raw: string): string {
  return SAFE_SUBJECT.test(raw) ? raw : `h-${createHash("sha256").update(raw).digest("hex").slice(0, 40)}`;
}

/** Scopes from `scope` (space-delimited, RFC 9068) or `scp` (array or string, common in IdPs). */
export function scopesFromClaims(payload: JWTPayload): string[] {
  const out = new Set<string>();
  const add = (v: unknown) => {
    const items: unknown[] = typeof v === "string" ? v.split(/\s+/) : Array.isArray(v) ? v : [];
    for (const s of items) if (typeof s === "string" && s) out.add(s);
  };
  add(payload["scope"]);
  add(payload["scp"]);
  return [...out];
}

/** Finds the JWKS URL in the issuer's OIDC or RFC 8414 metadata; the metadata must name the same issuer. */
export async function discoverJwksUrl(issuer: string, timeoutMs = 5_000): Promise<string> {
  const base = new URL(issuer);
  const path = base.pathname === "/" ? "" : base.pathname.replace(/\/$/, "");
  const candidates = [`${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`, `${base.origin}/.well-known/oauth-authorization-server${path}`];
  const problems: string[] = [];
  for (const url of candidates) {
    try {
      const res = await fetch(url, { headers: { accept: "application/json" }, signal: AbortSignal.timeout(timeoutMs) });
      if (!res.ok) {
        problems.push(`${url}: HTTP ${res.status}`);
        continue;
      }
      const meta = (await res.json()) as Record<string, unknown>;
      if (meta["issuer"] !== issuer) {
        problems.push(`${url}: issuer ${JSON.stringify(meta["issuer"])} is not ${JSON.stringify(issuer)}`);
        continue;
      }
      if (typeof meta["jwks_uri"] === "string") return meta["jwks_uri"];
      problems.push(`${url}: no jwks_uri`);
    } catch (error) {
      problems.push(`${url}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  throw new AuthUnavailableError(`authorization server metadata unavailable (${problems.join("; ")})`);
}

/** Errors that mean "this token is not valid" (401), as opposed to "could not check" (503). */
const INVALID_TOKEN_ERRORS = [
  errors.JWTClaimValidationFailed,
  errors.JWTExpired,
  errors.JWTInvalid,
  errors.JWSInvalid,
  errors.JWSSignatureVerificationFailed,
  errors.JOSEAlgNotAllowed,
  errors.JOSENotSupported,
  errors.JWKSNoMatchingKey,
  errors.JWKSMultipleMatchingKeys,
];
const isInvalidTokenError = (error: unknown) => INVALID_TOKEN_ERRORS.some((E) => error instanceof E);

export function createJwtAuthenticator(options: JwtAuthenticatorOptions): Authenticator {
  const algorithms = [...(options.algorithms ?? ASYMMETRIC_ALGS)];
  const clockTolerance = options.clockToleranceSec ?? 30;
  const readOnly = new Set(options.readOnlyClients ?? []);
  const tenancy = createTenancy({ ...options.tenancy, ...(options.clientIdClaim ? { tenantClaim: options.clientIdClaim } : {}) });
  const timeoutDuration = options.fetchTimeoutMs ?? 5_000;
  let keys: Promise<JWTVerifyGetKey> | undefined = options.keys ? Promise.resolve(options.keys) : undefined;

  const keySet = (): Promise<JWTVerifyGetKey> => {
    if (!keys) {
      const attempt = (async () => {
        const url = options.jwksUrl ?? (await discoverJwksUrl(options.issuer, timeoutDuration));
        return createRemoteJWKSet(new URL(url), { timeoutDuration, cooldownDuration: 30_000, cacheMaxAge: 10 * 60_000 });
      })();
      keys = attempt;
      // A failed discovery is retried, but at most every 5 s: bad tokens cannot turn into a
      // stream of outbound requests while the authorization server is down.
      attempt.catch(() => {
        setTimeout(() => {
          if (keys === attempt) keys = undefined;
        }, 5_000).unref();
      });
    }
    return keys;
  };

  function callerFrom(payload: JWTPayload): Caller | undefined {
    const rawClient = tenancy.rawTenantOf(payload);
    const clientId = tenancy.tenantOf(payload);
    if (rawClient === undefined || clientId === undefined) {
      options.logger?.debug("bearer token rejected", { reason: "no_tenant_claim" });
      return undefined;
    }
    const subject = subjectFromClaim(typeof payload.sub === "string" && payload.sub ? payload.sub : rawClient);
    const profileClaim = options.admissionProfileClaim ? payload[options.admissionProfileClaim] : undefined;
    const admissionProfile: AdmissionProfile = readOnly.has(clientId) || readOnly.has(rawClient) || profileClaim === "read_only" ? "read_only" : "full";
    const host = options.hostProfileClaim ? payload[options.hostProfileClaim] : undefined;
    if (host !== undefined && !isHostProfile(host)) {
      options.logger?.debug("bearer token rejected", { reason: "unknown_host_profile" });
      return undefined;
    }
    const principal = tenancy.isAdmin(payload) ? { clientId, subject, tenantAdmin: true } : { clientId, subject };
    // RFC 9068 access tokens name the client in client_id; OIDC-style ones in azp.
    const oauthClient =
      typeof payload["client_id"] === "string" && payload["client_id"]
        ? payload["client_id"]
        : typeof payload["azp"] === "string" && payload["azp"]
          ? payload["azp"]
          : undefined;
    return {
      principal,
      admissionProfile,
      ...(oauthClient !== undefined ? { oauthClientId: oauthClient } : {}),
      ...(host !== undefined ? { hostProfile: host } : {}),
      scopes: scopesFromClaims(payload),
    };
  }

  return {
    async authenticate(token) {
      if (!token || token.split(".").length !== 3) return undefined;
      let getKey: JWTVerifyGetKey;
      try {
        getKey = await keySet();
      } catch (error) {
        options.logger?.warn("oauth key discovery failed", { error });
        throw error instanceof AuthUnavailableError ? error : new AuthUnavailableError("authorization server keys unavailable", { cause: error });
      }
      try {
        const { payload, protectedHeader } = await jwtVerify(token, getKey, {
          issuer: options.issuer,
          audience: options.audience,
          algorithms,
          clockTolerance,
          requiredClaims: ["exp"],
        });
        if (protectedHeader.typ !== undefined && !ACCESS_TOKEN_TYPES.has(protectedHeader.typ.toLowerCase())) {
          options.logger?.debug("bearer token rejected", { reason: "token_type", typ: protectedHeader.typ });
          return undefined;
        }
        return callerFrom(payload);
      } catch (error) {
        if (isInvalidTokenError(error)) {
          options.logger?.debug("bearer token rejected", { reason: (error as { code?: string }).code ?? "invalid" });
          return undefined;
        }
        options.logger?.warn("bearer token check failed", { error });
        throw new AuthUnavailableError("bearer token could not be checked", { cause: error });
      }
    },
  };
}
