import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { RUNNER_TOKEN_HEADER, runnerCredential, runnerCredentialCheck, runnerCredentialHeaders } from "./runner-auth.js";

const KEY = "r".repeat(40);
const scope = { clientId: "acme", projectId: "p1" };
const refused = (why: RegExp) => (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated && why.test(e.rawMessage);

describe("Runner credentials", () => {
  it("are an HMAC of the scope under the broker's key: stable, and different for another key, tenant or project", () => {
    const credential = runnerCredential(KEY, scope);
    assert.match(credential, /^wcr1\.[A-Za-z0-9_-]{43}$/);
    assert.equal(runnerCredential(KEY, { ...scope }), credential);
    const others = [
      runnerCredential("s".repeat(40), scope),
      runnerCredential(KEY, { clientId: "other", projectId: "p1" }),
      runnerCredential(KEY, { clientId: "acme", projectId: "p2" }),
      // The fields are separated, so moving characters between them makes another credential.
      runnerCredential(KEY, { clientId: "acmep", projectId: "1" }),
    ];
    assert.equal(new Set([credential, ...others]).size, 5);
  });

  it("a check with a key accepts only the credential of the scope it is asked about", () => {
    const check = runnerCredentialCheck(KEY);
    check(new Headers({ [RUNNER_TOKEN_HEADER]: runnerCredential(KEY, scope) }), scope);
    assert.throws(() => check(new Headers(), scope), refused(/runner credential required/));
    assert.throws(() => check(new Headers({ [RUNNER_TOKEN_HEADER]: "" }), scope), refused(/runner credential required/));
    // A credential stolen from another workspace's Runner registers nothing here.
    const foreign = runnerCredential(KEY, { clientId: "acme", projectId: "p2" });
    assert.throws(() => check(new Headers({ [RUNNER_TOKEN_HEADER]: foreign }), scope), refused(/invalid runner credential/));
    assert.throws(() => check(new Headers({ [RUNNER_TOKEN_HEADER]: `${runnerCredential(KEY, scope)}x` }), scope), refused(/invalid runner credential/));
  });

  it("without a key nothing is checked and nothing is sent", () => {
    for (const key of [undefined, ""]) {
      runnerCredentialCheck(key)(new Headers(), scope);
      assert.deepEqual(runnerCredentialHeaders(key, scope), {});
    }
    assert.deepEqual(runnerCredentialHeaders(KEY, scope), { [RUNNER_TOKEN_HEADER]: runnerCredential(KEY, scope) });
    assert.equal(RUNNER_TOKEN_HEADER, "x-webcodex-runner-token");
  });
});
