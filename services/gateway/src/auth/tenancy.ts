/**
 * Who is who within a tenant: which token claim names the tenant and which claim values
 * make a caller a tenant admin. The principal is (tenant, subject): with one company OIDC
 * client, every person is their own principal within the company's tenant.
 *
 * Presets name the claims common identity providers use:
 * - `client` (default): the OAuth client (`client_id`, then `azp`) is the tenant;
 * - `keycloak`: the `organization` claim (Keycloak Organizations); admin groups from `groups`;
 * - `okta`: a `tenant` claim added to the authorization server; admin groups from `groups`;
 * - `entra`: the directory id `tid`; admin app roles from `roles`;
 * - `issuer`: one tenant per issuer (every caller of this authorization server).
 * An explicit tenant claim or admin claim overrides the preset's.
 */
import { createHash } from "node:crypto";
import type { JWTPayload } from "jose";
import { isCanonicalIdPart } from "@webcodex/contracts";

export const TENANT_PRESETS = ["client", "keycloak", "okta", "entra", "issuer"] as const;
export type TenantPreset = (typeof TENANT_PRESETS)[number];
export const isTenantPreset = (v: unknown): v is TenantPreset => typeof v === "string" && (TENANT_PRESETS as readonly string[]).includes(v);

export interface TenancyOptions {
  preset?: TenantPreset;
  /** Claim (dotted path for nested claims) naming the tenant; overrides the preset. */
  tenantClaim?: string;
  /** Claim (dotted path) holding roles or groups; overrides the preset. */
  adminClaim?: string;
  /** Values of the admin claim that make a caller a tenant admin. None: nobody is. */
  adminValues?: readonly string[];
}

const PRESETS: Record<TenantPreset, { tenantClaims: readonly string[]; adminClaim?: string }> = {
  client: { tenantClaims: ["client_id", "azp"] },
  keycloak: { tenantClaims: ["organization"], adminClaim: "groups" },
  okta: { tenantClaims: ["tenant"], adminClaim: "groups" },
  entra: { tenantClaims: ["tid"], adminClaim: "roles" },
  issuer: { tenantClaims: [] },
};

/**
 * A tenant id usable in canonical project ids (`agent:<tenant>:<project>`). Ids with other
 * characters (URL client ids of Client ID Metadata Documents, for example) map to a stable
 * digest so they can never collide with or impersonate a plain id.
 */
export function tenantIdFromClaim(raw: string): string {
  return isCanonicalIdPart(raw) ? raw : `h-${createHash("sha256").update(raw).digest("hex").slice(0, 40)}`;
}

/** The tenant id of "one tenant per issuer": the issuer's host and path, readable and stable. */
export function tenantIdFromIssuer(issuer: string): string {
  let readable: string;
  try {
    const url = new URL(issuer);
    readable = `${url.host}${url.pathname === "/" ? "" : url.pathname}`.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-+|-+$/g, "");
  } catch {
    readable = "";
  }
  return readable && isCanonicalIdPart(readable) ? readable : tenantIdFromClaim(issuer);
}

/** A claim by name, or by dotted path into nested objects (`realm_access.roles`). */
export function claimAt(payload: JWTPayload, path: string): unknown {
  if (path in payload) return payload[path];
  let at: unknown = payload;
  for (const part of path.split(".")) {
    if (at === null || typeof at !== "object" || Array.isArray(at)) return undefined;
    at = (at as Record<string, unknown>)[part];
  }
  return at;
}

/**
 * One tenant name from a claim value: a string, an array of exactly one string, or an object
 * with exactly one key (Keycloak's organization claim can be either). Several: ambiguous.
 */
function singleValue(v: unknown): string | undefined {
  if (typeof v === "string") return v || undefined;
  if (Array.isArray(v)) return v.length === 1 && typeof v[0] === "string" && v[0] ? v[0] : undefined;
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v);
    return keys.length === 1 && keys[0] ? keys[0] : undefined;
  }
  return undefined;
}

const values = (v: unknown): string[] =>
  (typeof v === "string" ? v.split(/[\s,]+/) : Array.isArray(v) ? v : []).filter((x): x is string => typeof x === "string" && x.length > 0);

export interface Tenancy {
  /** The tenant id of a verified token, or undefined when the token names none (refused). */
  tenantOf(payload: JWTPayload): string | undefined;
  /** The raw tenant name before it is made id-safe (read-only lists may name either). */
  rawTenantOf(payload: JWTPayload): string | undefined;
  isAdmin(payload: JWTPayload): boolean;
}

export function createTenancy(options: TenancyOptions = {}): Tenancy {
  const preset = PRESETS[options.preset ?? "client"];
  const claims = options.tenantClaim ? [options.tenantClaim, ...((options.preset ?? "client") === "client" ? preset.tenantClaims : [])] : preset.tenantClaims;
  const perIssuer = options.preset === "issuer" && !options.tenantClaim;
  const adminClaim = options.adminClaim ?? preset.adminClaim;
  const adminValues = new Set(options.adminValues ?? []);
  const rawTenantOf = (payload: JWTPayload): string | undefined => {
    if (perIssuer) return typeof payload.iss === "string" && payload.iss ? payload.iss : undefined;
    for (const claim of claims) {
      const v = singleValue(claimAt(payload, claim));
      if (v !== undefined) return v;
    }
    return undefined;
  };
  return {
    rawTenantOf,
    tenantOf(payload) {
      const raw = rawTenantOf(payload);
      if (raw === undefined) return undefined;
      return perIssuer ? tenantIdFromIssuer(raw) : tenantIdFromClaim(raw);
    },
    isAdmin(payload) {
      if (!adminClaim || adminValues.size === 0) return false;
      return values(claimAt(payload, adminClaim)).some((v) => adminValues.has(v));
    },
  };
}
