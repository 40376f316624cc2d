/**
 * Route credentials: what a gateway presents when it calls a Runner directly on a route the
 * broker issued. `wcrt1.<runner id>.<fence>.<expiry ms>.<mac>`, where the MAC is an HMAC of
 * those three values keyed by the Runner's own credential (which the broker derives from its
 * key, and which only that Runner holds). So a route credential is accepted by one Runner, for
 * one lease fence, until one expiry; it cannot be widened or extended without the broker, and a
 * stolen one opens nothing but that Runner's current lease until the expiry, which the Runner
 * also refuses once the lease moved on.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

/** The header a direct (route) call carries its credential in. */
export const ROUTE_CREDENTIAL_HEADER = "x-webcodex-route";

export interface RouteGrant {
  runnerId: string;
  fence: number;
  expiresAtMs: number;
}

const mac = (runnerCredential: string, g: RouteGrant) =>
  createHmac("sha256", runnerCredential).update(`webcodex-route-v1\0${g.runnerId}\0${g.fence}\0${g.expiresAtMs}`).digest("base64url");

/** A route credential for `grant`, keyed by the credential of the Runner it names. */
export function mintRouteCredential(runnerCredential: string, grant: RouteGrant): string {
  return `wcrt1.${Buffer.from(grant.runnerId).toString("base64url")}.${grant.fence}.${grant.expiresAtMs}.${mac(runnerCredential, grant)}`;
}

/**
 * The grant a route credential carries when it is genuine for this Runner (`runnerId`, keyed by
 * its own credential), else undefined. Expiry is the caller's check (it knows its clock).
 */
export function verifyRouteCredential(runnerCredential: string, runnerId: string, credential: string): RouteGrant | undefined {
  const parts = credential.split(".");
  if (parts.length !== 5 || parts[0] !== "wcrt1") return undefined;
  const [, id64, fenceText, expiryText, got] = parts as [string, string, string, string, string];
  const grant = { runnerId: Buffer.from(id64, "base64url").toString(), fence: Number(fenceText), expiresAtMs: Number(expiryText) };
  if (grant.runnerId !== runnerId || !Number.isSafeInteger(grant.fence) || !Number.isSafeInteger(grant.expiresAtMs)) return undefined;
  const want = Buffer.from(mac(runnerCredential, grant));
  const have = Buffer.from(got);
  return want.length === have.length && timingSafeEqual(want, have) ? grant : undefined;
}
