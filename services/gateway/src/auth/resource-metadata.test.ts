import { test } from "node:test";
import assert from "node:assert/strict";
import { bearerChallenge, protectedResourceMetadata } from "./resource-metadata.js";

const resourceMetadataUrl = "https://wcx.example/.well-known/oauth-protected-resource/mcp";

test("a 401 challenge leads with resource_metadata and names the scopes", () => {
  assert.equal(
    bearerChallenge({ resourceMetadataUrl, scope: ["webcodex:read", "webcodex:write"] }),
    `Bearer resource_metadata="${resourceMetadataUrl}", scope="webcodex:read webcodex:write"`,
  );
  assert.equal(
    bearerChallenge({ resourceMetadataUrl, error: "invalid_token", errorDescription: "expired", scope: ["webcodex:read"] }),
    `Bearer resource_metadata="${resourceMetadataUrl}", error="invalid_token", error_description="expired", scope="webcodex:read"`,
  );
});

test("an insufficient_scope challenge leads with the error", () => {
  assert.equal(
    bearerChallenge({ resourceMetadataUrl, error: "insufficient_scope", scope: ["webcodex:read", "webcodex:write"] }),
    `Bearer error="insufficient_scope", resource_metadata="${resourceMetadataUrl}", scope="webcodex:read webcodex:write"`,
  );
});

test("quotes and backslashes in parameter values are escaped", () => {
  assert.match(bearerChallenge({ resourceMetadataUrl, error: "invalid_token", errorDescription: 'a "b" \\ c' }), /error_description="a \\"b\\" \\\\ c"/);
});

test("RFC 9728 metadata omits authorization_servers when none is configured", () => {
  assert.deepEqual(protectedResourceMetadata({ resource: "https://wcx.example/mcp", authorizationServers: [], scopesSupported: ["webcodex:read"] }), {
    resource: "https://wcx.example/mcp",
    scopes_supported: ["webcodex:read"],
    bearer_methods_supported: ["header"],
  });
});
