import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mintRouteCredential, verifyRouteCredential } from "./route-credential.js";

describe("route credentials", () => {
  const grant = { runnerId: "runner-a", fence: 7, expiresAtMs: 1_900_000_000_000 };
  it("verify for the Runner they name, with their fence and expiry", () => {
    assert.deepEqual(verifyRouteCredential("cred-a", "runner-a", mintRouteCredential("cred-a", grant)), grant);
  });
  it("are refused by another Runner, under another key, or when any field was changed", () => {
    const c = mintRouteCredential("cred-a", grant);
    assert.equal(verifyRouteCredential("cred-a", "runner-b", c), undefined, "another Runner id");
    assert.equal(verifyRouteCredential("cred-b", "runner-a", c), undefined, "another Runner's key");
    const parts = c.split(".");
    for (const i of [2, 3]) {
      const forged = [...parts];
      forged[i] = String(Number(forged[i]) + 1);
      assert.equal(verifyRouteCredential("cred-a", "runner-a", forged.join(".")), undefined, `field ${i} changed`);
    }
    assert.equal(verifyRouteCredential("cred-a", "runner-a", "wcrt1.x"), undefined);
    assert.equal(verifyRouteCredential("cred-a", "runner-a", ""), undefined);
  });
});
