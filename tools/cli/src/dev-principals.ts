/**
 * Who may call a local `webcodex dev` server: its dev tokens, the refusal of several tenants or
 * writers where Jobs cannot be isolated, and its OAuth and rate-limit settings.
 */
import { gatewayConfigSpec, resolveDevTokens, tenancyOptions } from "@webcodex/gateway";
import type { StaticTokenEntry } from "@webcodex/gateway";
import { isolationRefusal, loadRunnerSettings } from "@webcodex/runner";
import type { EmbeddedOptions } from "./embedded.js";

/**
 * Dev tokens from WEBCODEX_DEV_TOKENS_FILE, WEBCODEX_DEV_TOKEN, or a random token (printed,
 * since it exists nowhere else). The local Project is registered under the first token's tenant.
 */
export function devTokens(env: NodeJS.ProcessEnv): { tokens: StaticTokenEntry[]; shown?: string; clientId: string } {
  const dev = resolveDevTokens({
    devToken: env["WEBCODEX_DEV_TOKEN"],
    devTokensFile: env["WEBCODEX_DEV_TOKENS_FILE"],
    devClientId: env["WEBCODEX_DEV_CLIENT_ID"] || "local",
  });
  return { tokens: dev.tokens, ...(dev.token ? { shown: dev.token } : {}), clientId: dev.tokens[0]?.clientId ?? "local" };
}

/** Refuses (throws) a configuration serving several tenants or writers where Jobs cannot be isolated. */
export function refuseWithoutIsolation(tokens: readonly StaticTokenEntry[], env: NodeJS.ProcessEnv, runnerEnv: NodeJS.ProcessEnv = env): void {
  const principals = {
    tenants: new Set(tokens.map((t) => t.clientId)).size,
    writers: tokens.filter((t) => t.admissionProfile !== "read_only").length,
    open: Boolean(env["WEBCODEX_OAUTH_ISSUER"]),
  };
  const refusal = isolationRefusal(principals, loadRunnerSettings(runnerEnv));
  if (refusal !== undefined) throw new Error(refusal);
}

/**
 * OAuth and rate-limit settings for `webcodex dev`, from the same WEBCODEX_* variables the
 * distributed gateway reads. With several principals (more than one token, or an identity
 * provider) each principal gets the distributed gateway's default rate limit unless
 * WEBCODEX_RATE_LIMIT_PER_MINUTE says otherwise (0 turns it off); a single local principal has
 * none unless a WEBCODEX_RATE_LIMIT* variable sets one.
 */
export function devAuthOptions(env: NodeJS.ProcessEnv, principals: number): Pick<EmbeddedOptions, "oauth" | "readOnlyClients" | "rateLimit"> {
  const int = (name: string): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === "") return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer`);
    return n;
  };
  const issuer = env["WEBCODEX_OAUTH_ISSUER"];
  const tolerance = int("WEBCODEX_OAUTH_CLOCK_TOLERANCE_S");
  const shared = principals > 1 || Boolean(env["WEBCODEX_OAUTH_ISSUER"]);
  const perMinute = int("WEBCODEX_RATE_LIMIT_PER_MINUTE") ?? (shared ? gatewayConfigSpec.rateLimitPerMinute.default : 0);
  const burst = int("WEBCODEX_RATE_LIMIT_BURST");
  const tenantPerMinute = int("WEBCODEX_RATE_LIMIT_TENANT_PER_MINUTE") ?? 0;
  const overrides = env["WEBCODEX_RATE_LIMITS"];
  const readOnly = (env["WEBCODEX_READ_ONLY_CLIENTS"] ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const opt = (key: string, name: string) => (env[name] ? { [key]: env[name] } : {});
  return {
    ...(issuer
      ? {
          oauth: {
            issuer,
            ...opt("audience", "WEBCODEX_OAUTH_AUDIENCE"),
            ...opt("jwksUrl", "WEBCODEX_OAUTH_JWKS_URL"),
            ...opt("clientIdClaim", "WEBCODEX_OAUTH_CLIENT_ID_CLAIM"),
            tenancy: tenancyOptions(env["WEBCODEX_OAUTH_TENANT_PRESET"], env["WEBCODEX_OAUTH_ADMIN_CLAIM"], env["WEBCODEX_OAUTH_ADMIN_VALUES"]),
            ...opt("admissionProfileClaim", "WEBCODEX_OAUTH_ADMISSION_CLAIM"),
            ...opt("hostProfileClaim", "WEBCODEX_OAUTH_HOST_PROFILE_CLAIM"),
            ...(tolerance !== undefined ? { clockToleranceSec: tolerance } : {}),
          },
        }
      : {}),
    ...(readOnly.length > 0 ? { readOnlyClients: readOnly } : {}),
    ...(perMinute > 0 || tenantPerMinute > 0 || overrides
      ? { rateLimit: { perMinute, tenantPerMinute, ...(burst ? { burst } : {}), ...(overrides ? { perClient: overrides } : {}) } }
      : {}),
  };
}
