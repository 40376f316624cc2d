import { test } from "node:test";
import assert from "node:assert/strict";
import { createTenancy, tenantIdFromIssuer } from "./tenancy.js";

test("the default preset keeps the OAuth client as the tenant (client_id, then azp)", () => {
  const t = createTenancy();
  assert.equal(t.tenantOf({ client_id: "acme", azp: "other" }), "acme");
  assert.equal(t.tenantOf({ azp: "acme" }), "acme");
  assert.equal(t.tenantOf({ sub: "alice" }), undefined, "no tenant claim: refused");
  assert.equal(createTenancy({ tenantClaim: "org" }).tenantOf({ org: "acme", client_id: "c" }), "acme", "an explicit claim wins, client_id stays the fallback");
});

test("presets read the tenant where each provider puts it", () => {
  assert.equal(
    createTenancy({ preset: "entra" }).tenantOf({ tid: "72f988bf-86f1-41af-91ab-2d7cd011db47", azp: "app" }),
    "72f988bf-86f1-41af-91ab-2d7cd011db47",
  );
  assert.equal(createTenancy({ preset: "entra" }).tenantOf({ azp: "app" }), undefined, "entra without tid is refused, not put in the client's tenant");
  const keycloak = createTenancy({ preset: "keycloak" });
  assert.equal(keycloak.tenantOf({ organization: ["acme"] }), "acme");
  assert.equal(keycloak.tenantOf({ organization: { acme: { id: "42" } } }), "acme");
  assert.equal(keycloak.tenantOf({ organization: ["acme", "beta"] }), undefined, "two organizations are ambiguous: refused");
  assert.equal(createTenancy({ preset: "okta" }).tenantOf({ tenant: "acme", cid: "0oa1" }), "acme");
  const perIssuer = createTenancy({ preset: "issuer" });
  assert.equal(perIssuer.tenantOf({ iss: "https://login.example.com/realms/acme", azp: "x" }), "login.example.com-realms-acme");
  assert.equal(tenantIdFromIssuer("http://127.0.0.1:4444"), "127.0.0.1-4444");
  assert.equal(
    createTenancy({ preset: "entra", tenantClaim: "org.id" }).tenantOf({ org: { id: "nested" }, tid: "t" }),
    "nested",
    "dotted paths reach nested claims",
  );
});

test("a tenant that cannot be a canonical id part becomes a stable digest", () => {
  const t = createTenancy({ preset: "okta" });
  const id = t.tenantOf({ tenant: "acme:evil" }) ?? "";
  assert.match(id, /^h-[0-9a-f]{40}$/);
  assert.equal(t.tenantOf({ tenant: "acme:evil" }), id);
});

test("tenant admins come from a claim/group mapping; nobody is admin unless values are configured", () => {
  assert.equal(createTenancy({ preset: "keycloak" }).isAdmin({ groups: ["webcodex-admins"] }), false);
  const kc = createTenancy({ preset: "keycloak", adminValues: ["webcodex-admins"] });
  assert.equal(kc.isAdmin({ groups: ["dev", "webcodex-admins"] }), true);
  assert.equal(kc.isAdmin({ groups: ["dev"] }), false);
  assert.equal(kc.isAdmin({ roles: ["webcodex-admins"] }), false, "keycloak reads groups, not roles");
  assert.equal(createTenancy({ preset: "entra", adminValues: ["WebCodex.Admin"] }).isAdmin({ roles: ["WebCodex.Admin"] }), true);
  assert.equal(createTenancy({ adminClaim: "realm_access.roles", adminValues: ["admin"] }).isAdmin({ realm_access: { roles: ["admin"] } }), true);
  assert.equal(createTenancy({ adminClaim: "role", adminValues: ["admin"] }).isAdmin({ role: "admin" }), true, "a single string value counts");
});
