import { readConfig } from "@webcodex/platform";
import type { Env } from "@webcodex/platform";

export const gatewayConfigSpec = {
  port: { kind: "int", env: "WEBCODEX_PORT", default: 8080, min: 0, max: 65535 },
  host: { kind: "string", env: "WEBCODEX_HOST", default: "0.0.0.0" },
  publicUrl: { kind: "string", env: "WEBCODEX_PUBLIC_URL" },
  allowedHosts: { kind: "string", env: "WEBCODEX_ALLOWED_HOSTS", default: "localhost,127.0.0.1,[::1]" },
  toolRegistryUrl: { kind: "string", env: "WEBCODEX_TOOL_REGISTRY_URL", required: true },
  refResolverUrl: { kind: "string", env: "WEBCODEX_REF_RESOLVER_URL", required: true },
  auditUrl: { kind: "string", env: "WEBCODEX_AUDIT_URL", required: true },
  runnerBrokerUrl: { kind: "string", env: "WEBCODEX_RUNNER_BROKER_URL", required: true },
  devToken: { kind: "string", env: "WEBCODEX_DEV_TOKEN" },
  devTokensFile: { kind: "string", env: "WEBCODEX_DEV_TOKENS_FILE" },
  devClientId: { kind: "string", env: "WEBCODEX_DEV_CLIENT_ID", default: "local" },
  oauthIssuer: { kind: "string", env: "WEBCODEX_OAUTH_ISSUER" },
  hostProfile: { kind: "enum", env: "WEBCODEX_HOST_PROFILE", values: ["generic", "app"], default: "generic" },
  logLevel: { kind: "enum", env: "WEBCODEX_LOG_LEVEL", values: ["debug", "info", "warn", "error", "silent"], default: "info" },
} as const;

export const loadConfig = (env: Env) => readConfig(gatewayConfigSpec, env);
export type GatewayConfig = ReturnType<typeof loadConfig>;
