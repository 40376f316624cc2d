import { test } from "node:test";
import assert from "node:assert/strict";
import { createStaticTokenAuthenticator } from "./auth.js";
import { parseDevTokensFile } from "./dev-tokens.js";

const token = "t".repeat(24);

test("a dev token may name its Host profile; another value is refused when the file is read", async () => {
  const entries = parseDevTokensFile(
    JSON.stringify({
      tokens: [
        { token, client_id: "acme", subject: "app-user", host_profile: "app" },
        { token: "u".repeat(24), client_id: "acme", subject: "cli" },
      ],
    }),
  );
  assert.equal(entries[0]?.hostProfile, "app");
  assert.equal(entries[1]?.hostProfile, undefined, "absent: the gateway's profile applies");
  const auth = createStaticTokenAuthenticator(entries);
  assert.equal((await auth.authenticate(token))?.hostProfile, "app");
  assert.equal((await auth.authenticate("u".repeat(24)))?.hostProfile, undefined);
  assert.throws(
    () => parseDevTokensFile(JSON.stringify({ tokens: [{ token, client_id: "acme", subject: "x", host_profile: "chatgpt" }] })),
    /host_profile must be one of generic, app, code_mode/,
  );
});
