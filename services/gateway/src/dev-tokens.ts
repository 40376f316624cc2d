/**
 * Static dev tokens: a file mapping tokens to principals, or one token (given, or random and
 * shown once). For `webcodex dev`, `webcodex up` and a gateway run without OAuth.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Logger } from "@webcodex/platform";
import { HOST_PROFILES, isAdmissionProfile, isCanonicalIdPart, isHostProfile } from "@webcodex/contracts";
import type { StaticTokenEntry } from "./auth.js";

/**
 * Parses a dev tokens file:
 * `{"tokens": [{"token", "client_id", "subject", "tenant_admin"?, "admission_profile"?, "host_profile"?, "oauth_client_id"?, "scopes"?}]}`.
 * Client ids must be usable in canonical project ids (`[A-Za-z0-9._-]`, at most 128).
 */
export function parseDevTokensFile(text: string): StaticTokenEntry[] {
  const parsed = JSON.parse(text) as { tokens?: Array<Record<string, unknown>> };
  if (!Array.isArray(parsed.tokens)) throw new Error("dev tokens file needs a tokens array");
  return parsed.tokens.map((t, i) => {
    const token = t["token"],
      clientId = t["client_id"],
      subject = t["subject"],
      profile = t["admission_profile"],
      host = t["host_profile"],
      scopes = t["scopes"],
      admin = t["tenant_admin"],
      oauthClient = t["oauth_client_id"];
    if (typeof token !== "string" || token.length < MIN_DEV_TOKEN_LENGTH)
      throw new Error(`tokens[${i}].token must be a string of at least ${MIN_DEV_TOKEN_LENGTH} characters`);
    if (typeof clientId !== "string" || typeof subject !== "string") throw new Error(`tokens[${i}] needs client_id and subject`);
    if (!isCanonicalIdPart(clientId)) throw new Error(`tokens[${i}].client_id must match [A-Za-z0-9._-]{1,128}`);
    if (profile !== undefined && !isAdmissionProfile(profile)) throw new Error(`tokens[${i}].admission_profile must be full or read_only`);
    if (host !== undefined && !isHostProfile(host)) throw new Error(`tokens[${i}].host_profile must be one of ${HOST_PROFILES.join(", ")}`);
    if (oauthClient !== undefined && (typeof oauthClient !== "string" || oauthClient === ""))
      throw new Error(`tokens[${i}].oauth_client_id must be a non-empty string`);
    if (admin !== undefined && typeof admin !== "boolean") throw new Error(`tokens[${i}].tenant_admin must be true or false`);
    if (scopes !== undefined && (!Array.isArray(scopes) || scopes.some((x) => typeof x !== "string")))
      throw new Error(`tokens[${i}].scopes must be an array of strings`);
    return {
      token,
      clientId,
      subject,
      ...(admin ? { tenantAdmin: true } : {}),
      ...(profile ? { admissionProfile: profile } : {}),
      ...(host !== undefined ? { hostProfile: host } : {}),
      ...(oauthClient !== undefined ? { oauthClientId: oauthClient } : {}),
      ...(scopes ? { scopes: scopes as string[] } : {}),
    };
  });
}

/** The settings dev tokens come from (a subset of GatewayConfig; the CLI passes its env). */
export interface DevTokenSettings {
  devToken?: string | undefined;
  devTokensFile?: string | undefined;
  devClientId: string;
  /** With OAuth configured no random token is made: only tokens asked for exist. */
  oauthIssuer?: string | undefined;
}

export interface DevTokens {
  tokens: StaticTokenEntry[];
  /** The single token (given or generated) when not from a file, to show the user. */
  token?: string;
  generated: boolean;
}

/** The shortest dev token accepted, from WEBCODEX_DEV_TOKEN or a tokens file: a short token is guessable. */
export const MIN_DEV_TOKEN_LENGTH = 16;

/** Dev tokens from a file, the given token, or a random one (24 bytes, base64url). */
export function resolveDevTokens(settings: DevTokenSettings): DevTokens {
  if (settings.devToken && settings.devToken.length < MIN_DEV_TOKEN_LENGTH) {
    throw new Error(`WEBCODEX_DEV_TOKEN must be at least ${MIN_DEV_TOKEN_LENGTH} characters (a short token can be guessed); unset it to get a random one`);
  }
  if (settings.devTokensFile) return { tokens: parseDevTokensFile(readFileSync(settings.devTokensFile, "utf8")), generated: false };
  if (settings.oauthIssuer && !settings.devToken) return { tokens: [], generated: false };
  const token = settings.devToken || randomBytes(24).toString("base64url");
  return { tokens: [{ token, clientId: settings.devClientId, subject: "dev" }], token, generated: !settings.devToken };
}

/** The gateway's dev tokens; a generated one is logged once (its only way out). */
export function devTokenEntries(settings: DevTokenSettings, logger: Logger): StaticTokenEntry[] {
  const dev = resolveDevTokens(settings);
  if (dev.generated) logger.info("generated dev token (set WEBCODEX_DEV_TOKEN to fix it)", { token: dev.token });
  return dev.tokens;
}
