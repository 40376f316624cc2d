/**
 * Gateway options that follow from a deployment's parsed config (distributed mode): its
 * public URL, the Host headers it accepts, OAuth, read-only tenants, rate limits.
 */
import type { HostProfile } from "@webcodex/contracts";
import type { GatewayConfig } from "./config.js";
import { isTenantPreset, TENANT_PRESETS } from "./auth/tenancy.js";
import type { TenancyOptions } from "./auth/tenancy.js";
import type { GatewayDeps } from "./gateway.js";

const splitList = (text: string) =>
  text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/** Tenant preset and admin mapping from their settings (shared by `webcodex dev`). */
export function tenancyOptions(
  preset: string | undefined,
  adminClaim: string | undefined,
  adminValues: string | undefined,
): Omit<TenancyOptions, "tenantClaim"> {
  if (preset !== undefined && preset !== "" && !isTenantPreset(preset))
    throw new Error(`WEBCODEX_OAUTH_TENANT_PRESET must be one of ${TENANT_PRESETS.join(", ")}`);
  const values = splitList(adminValues ?? "");
  return { ...(preset ? { preset } : {}), ...(adminClaim ? { adminClaim } : {}), ...(values.length > 0 ? { adminValues: values } : {}) };
}

export type DeploymentOptions = Pick<
  GatewayDeps,
  | "publicUrl"
  | "allowedHosts"
  | "hostProfile"
  | "auditSpoolDir"
  | "oauth"
  | "readOnlyClients"
  | "rateLimit"
  | "workflowPolicy"
  | "mcpSessionKey"
  | "skillCatalogsDir"
>;

export function deploymentOptions(config: GatewayConfig): DeploymentOptions {
  // The base URL; the MCP URL (…/mcp) is accepted too, as the Helm chart passes that.
  const publicUrl = (config.publicUrl ?? `http://127.0.0.1:${config.port}`).replace(/\/+$/, "").replace(/\/mcp$/, "");
  return {
    publicUrl,
    // The public URL's host is always accepted: behind an ingress that is the Host header.
    allowedHosts: [...new Set([...splitList(config.allowedHosts), new URL(publicUrl).hostname].map((h) => h.toLowerCase()))],
    hostProfile: config.hostProfile as HostProfile,
    workflowPolicy: config.workflowPolicy,
    ...(config.mcpSessionKey ? { mcpSessionKey: config.mcpSessionKey } : {}),
    ...(config.auditSpoolDir ? { auditSpoolDir: config.auditSpoolDir } : {}),
    ...(config.skillCatalogsDir !== undefined ? { skillCatalogsDir: config.skillCatalogsDir } : {}),
    ...(config.oauthIssuer
      ? {
          oauth: {
            issuer: config.oauthIssuer,
            ...(config.oauthAudience ? { audience: config.oauthAudience } : {}),
            ...(config.oauthJwksUrl ? { jwksUrl: config.oauthJwksUrl } : {}),
            ...(config.oauthClientIdClaim ? { clientIdClaim: config.oauthClientIdClaim } : {}),
            tenancy: tenancyOptions(config.oauthTenantPreset, config.oauthAdminClaim, config.oauthAdminValues),
            ...(config.oauthAdmissionClaim ? { admissionProfileClaim: config.oauthAdmissionClaim } : {}),
            ...(config.oauthHostProfileClaim ? { hostProfileClaim: config.oauthHostProfileClaim } : {}),
            clockToleranceSec: config.oauthClockToleranceS,
          },
        }
      : {}),
    readOnlyClients: splitList(config.readOnlyClients),
    rateLimit: {
      perMinute: config.rateLimitPerMinute,
      burst: config.rateLimitBurst,
      tenantPerMinute: config.rateLimitTenantPerMinute,
      perClient: config.rateLimits,
    },
  };
}
