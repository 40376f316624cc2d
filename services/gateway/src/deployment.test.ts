import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { gatewayConfigSpec, loadConfig } from "./config.js";
import { TENANT_PRESETS } from "./auth/tenancy.js";
import { deploymentOptions } from "./deployment.js";

const peers = {
  WEBCODEX_TOOL_REGISTRY_URL: "http://t",
  WEBCODEX_REF_RESOLVER_URL: "http://r",
  WEBCODEX_AUDIT_URL: "http://a",
  WEBCODEX_RUNNER_BROKER_URL: "http://b",
};

describe("deploymentOptions", () => {
  it("defaults: the local public URL, the loopback hosts, no OAuth", () => {
    const o = deploymentOptions(loadConfig(peers));
    assert.equal(o.publicUrl, "http://127.0.0.1:8080");
    assert.deepEqual(o.allowedHosts, ["localhost", "127.0.0.1", "[::1]"]);
    assert.equal("oauth" in o, false);
    assert.deepEqual(o.readOnlyClients, []);
    assert.deepEqual(o.rateLimit, { perMinute: 600, burst: 0, tenantPerMinute: 0, perClient: "" });
  });

  it("the public URL may be the MCP URL; its host is accepted, lowercased, once", () => {
    const o = deploymentOptions(
      loadConfig({ ...peers, WEBCODEX_PUBLIC_URL: "https://MCP.Example.com/mcp/", WEBCODEX_ALLOWED_HOSTS: "mcp.example.com, a.test ,," }),
    );
    assert.equal(o.publicUrl, "https://MCP.Example.com");
    assert.deepEqual(o.allowedHosts, ["mcp.example.com", "a.test"]);
  });

  it("OAuth options only with an issuer, carrying only the claims set", () => {
    const o = deploymentOptions(
      loadConfig({ ...peers, WEBCODEX_OAUTH_ISSUER: "https://as.example", WEBCODEX_OAUTH_CLIENT_ID_CLAIM: "azp", WEBCODEX_READ_ONLY_CLIENTS: "x, y" }),
    );
    assert.deepEqual(o.oauth, { issuer: "https://as.example", clientIdClaim: "azp", tenancy: { preset: "client" }, clockToleranceSec: 30 });
    assert.deepEqual(o.readOnlyClients, ["x", "y"]);
  });

  it("tenancy: a preset, the admin claim and its values; a per-tenant ceiling beside the per-principal rate", () => {
    const o = deploymentOptions(
      loadConfig({
        ...peers,
        WEBCODEX_OAUTH_ISSUER: "https://login.microsoftonline.com/t/v2.0",
        WEBCODEX_OAUTH_TENANT_PRESET: "entra",
        WEBCODEX_OAUTH_ADMIN_VALUES: "WebCodex.Admin, Ops",
        WEBCODEX_RATE_LIMIT_PER_MINUTE: "60",
        WEBCODEX_RATE_LIMIT_TENANT_PER_MINUTE: "3000",
      }),
    );
    assert.deepEqual(o.oauth?.tenancy, { preset: "entra", adminValues: ["WebCodex.Admin", "Ops"] });
    assert.deepEqual(o.rateLimit, { perMinute: 60, burst: 0, tenantPerMinute: 3000, perClient: "" });
    assert.throws(() => loadConfig({ ...peers, WEBCODEX_OAUTH_TENANT_PRESET: "auth0" }), /WEBCODEX_OAUTH_TENANT_PRESET/);
    assert.deepEqual(gatewayConfigSpec.oauthTenantPreset.values, TENANT_PRESETS, "the setting admits exactly the presets");
  });
});
