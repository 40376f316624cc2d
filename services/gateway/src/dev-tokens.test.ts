import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@webcodex/platform";
import { devTokenEntries, parseDevTokensFile, resolveDevTokens } from "./dev-tokens.js";

const T = "0123456789abcdef-token";

describe("parseDevTokensFile", () => {
  it("maps each entry to a principal, with the optional admission profile and scopes", () => {
    const text = JSON.stringify({
      tokens: [
        { token: T, client_id: "acme", subject: "alice" },
        { token: `${T}-2`, client_id: "acme.dev_1", subject: "bob", admission_profile: "read_only", scopes: ["webcodex:read"] },
      ],
    });
    assert.deepEqual(parseDevTokensFile(text), [
      { token: T, clientId: "acme", subject: "alice" },
      { token: `${T}-2`, clientId: "acme.dev_1", subject: "bob", admissionProfile: "read_only", scopes: ["webcodex:read"] },
    ]);
  });

  it("rejects each malformed entry with its index and what is wrong", () => {
    const bad = (entry: Record<string, unknown>) => () => parseDevTokensFile(JSON.stringify({ tokens: [{ token: T, client_id: "a", subject: "s" }, entry] }));
    assert.throws(() => parseDevTokensFile("{}"), /needs a tokens array/);
    assert.throws(() => parseDevTokensFile("not json"), SyntaxError);
    assert.throws(bad({ token: "short", client_id: "a", subject: "s" }), /tokens\[1\]\.token must be a string of at least 16 characters/);
    assert.throws(bad({ token: T, subject: "s" }), /tokens\[1\] needs client_id and subject/);
    assert.throws(bad({ token: T, client_id: "a" }), /tokens\[1\] needs client_id and subject/);
    assert.throws(bad({ token: T, client_id: "a:b", subject: "s" }), /tokens\[1\]\.client_id must match/);
    assert.throws(bad({ token: T, client_id: "x".repeat(129), subject: "s" }), /tokens\[1\]\.client_id must match/);
    assert.throws(bad({ token: T, client_id: "a", subject: "s", admission_profile: "admin" }), /tokens\[1\]\.admission_profile must be full or read_only/);
    assert.throws(bad({ token: T, client_id: "a", subject: "s", scopes: "webcodex:read" }), /tokens\[1\]\.scopes must be an array of strings/);
    assert.throws(bad({ token: T, client_id: "a", subject: "s", scopes: [1] }), /tokens\[1\]\.scopes must be an array of strings/);
  });
});

describe("resolveDevTokens and devTokenEntries", () => {
  it("a tokens file wins over a single token", () => {
    const dir = mkdtempSync(join(tmpdir(), "wcx-devtokens-"));
    try {
      const file = join(dir, "tokens.json");
      writeFileSync(file, JSON.stringify({ tokens: [{ token: T, client_id: "acme", subject: "alice" }] }));
      assert.deepEqual(resolveDevTokens({ devTokensFile: file, devToken: "ignored-ignored-1", devClientId: "local" }), {
        tokens: [{ token: T, clientId: "acme", subject: "alice" }],
        generated: false,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a given token maps to the dev client id and is not logged", () => {
    const lines: string[] = [];
    const logger = createLogger({ service: "t", write: (l) => lines.push(l) });
    assert.deepEqual(devTokenEntries({ devToken: T, devClientId: "acme" }, logger), [{ token: T, clientId: "acme", subject: "dev" }]);
    assert.deepEqual(lines, []);
  });

  it("without one, a random token is generated (a new one each time) and logged once", () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger({ service: "t", write: (l) => lines.push(JSON.parse(l) as Record<string, unknown>) });
    const [first] = devTokenEntries({ devClientId: "local", devToken: "" }, logger);
    assert.match(first?.token ?? "", /^[A-Za-z0-9_-]{32}$/);
    assert.deepEqual(
      lines.map((l) => [l["msg"], l["token"]]),
      [["generated dev token (set WEBCODEX_DEV_TOKEN to fix it)", first?.token]],
    );
    const again = resolveDevTokens({ devClientId: "local" });
    assert.equal(again.generated, true);
    assert.notEqual(again.token, first?.token);
  });

  it("with OAuth configured and no dev token, there is no dev token at all", () => {
    assert.deepEqual(resolveDevTokens({ devClientId: "local", oauthIssuer: "https://issuer.example" }), { tokens: [], generated: false });
    assert.deepEqual(resolveDevTokens({ devClientId: "local", oauthIssuer: "https://issuer.example", devToken: T }).tokens, [
      { token: T, clientId: "local", subject: "dev" },
    ]);
  });
});

describe("dev token length", () => {
  it("a WEBCODEX_DEV_TOKEN shorter than 16 characters is refused; 16 is accepted", () => {
    assert.throws(() => resolveDevTokens({ devToken: "fifteen-chars!!", devClientId: "local" }), /at least 16 characters/);
    assert.throws(() => resolveDevTokens({ devToken: "abc", devClientId: "local" }), /WEBCODEX_DEV_TOKEN must be at least 16/);
    assert.equal(resolveDevTokens({ devToken: "sixteen-chars-ok", devClientId: "local" }).token, "sixteen-chars-ok");
  });
});
