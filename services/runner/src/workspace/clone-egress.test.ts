import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isNonPublicAddress, resolveCloneTarget } from "./clone-egress.js";
import { credentialApplies } from "./clone.js";

describe("clone egress", () => {
  it("refuses loopback, link-local, private and metadata targets in every spelling, with one detail code", async () => {
    for (const url of [
      "http://127.0.0.1:5432/x.git",
      "http://[::1]:6379/x.git",
      "http://0x7f000001/x.git",
      "http://2130706433/x.git",
      "git://0x7f000001/x.git",
      "git://127.1/x.git",
      "https://localhost/x.git",
      "http://169.254.169.254/latest/meta-data",
      "http://10.1.2.3/x.git",
      "http://[::ffff:127.0.0.1]/x.git",
      "http://[fe80::1]/x.git",
      "http://192.168.1.1/x.git",
    ]) {
      const r = await resolveCloneTarget(url, []);
      assert.ok("failure" in r, url);
      assert.equal(r.failure.detail_code, "clone_target_not_allowed", url);
    }
  });

  it("lets an operator allow-list a private host, and pins what it resolved", async () => {
    const r = await resolveCloneTarget("http://localhost:8080/x.git", ["localhost"]);
    assert.ok(!("failure" in r));
    assert.match(r.pin ?? "", /^localhost:8080:(127\.0\.0\.1|\[::1\])$/);
    const g = await resolveCloneTarget("git://localhost:9418/x.git", ["localhost"]);
    assert.ok(!("failure" in g));
    assert.match(g.url, /^git:\/\/(127\.0\.0\.1|\[::1\]):9418\/x\.git$/);
  });

  it("classifies public and non-public addresses", () => {
    assert.equal(isNonPublicAddress("8.8.8.8"), false);
    assert.equal(isNonPublicAddress("2606:4700::1111"), false);
    for (const a of ["100.64.0.1", "172.20.0.1", "0.0.0.0", "::", "fd00::1", "224.0.0.1"]) assert.equal(isNonPublicAddress(a), true, a);
  });
});

describe("clone credentials", () => {
  it("are sent only to URLs under their prefix; without a prefix, never", () => {
    const c = { username: "u", password: "p" };
    assert.equal(credentialApplies(c, "https://git.example.com/a.git"), false);
    assert.equal(credentialApplies({ ...c, urlPrefix: "https://git.example.com/" }, "https://git.example.com/a.git"), true);
    assert.equal(credentialApplies({ ...c, urlPrefix: "https://git.example.com/" }, "http://git.example.com/a.git"), false);
    assert.equal(credentialApplies({ ...c, urlPrefix: "https://git.example.com/" }, "https://git.example.com.evil.test/a.git"), false);
    assert.equal(credentialApplies({ ...c, urlPrefix: "https://git.example.com" }, "https://git.example.com.evil.test/a.git"), false);
    assert.equal(credentialApplies({ ...c, urlPrefix: "https://git.example.com" }, "https://git.example.com/a.git"), true);
  });
});
