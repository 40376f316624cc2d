import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createAppSessions, declaresApps } from "./app-session.js";

const apps = { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } };

describe("App Host sessions", () => {
  it("only the extension with the MCP App HTML profile declares an App Host", () => {
    assert.equal(declaresApps(apps), true);
    for (const caps of [
      {},
      undefined,
      null,
      { extensions: {} },
      { extensions: { "io.modelcontextprotocol/ui": {} } },
      { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html"] } } },
    ]) {
      assert.equal(declaresApps(caps), false, JSON.stringify(caps));
    }
  });

  it("a session id says App Host only to the caller it was issued to, and cannot be forged", () => {
    const sessions = createAppSessions("k");
    const id = sessions.issue("acme\u0000alice", apps);
    assert.equal(sessions.declaredApp(id, "acme\u0000alice"), true);
    assert.equal(sessions.declaredApp(id, "acme\u0000bob"), false, "another caller");
    assert.equal(createAppSessions("other key").declaredApp(id, "acme\u0000alice"), false, "another key");
    const generic = sessions.issue("acme\u0000alice", {});
    assert.equal(sessions.declaredApp(generic, "acme\u0000alice"), false);
    const [uuid, , mac] = generic.split(".");
    assert.equal(sessions.declaredApp(`${uuid}.a.${mac}`, "acme\u0000alice"), false, "flipping the flag breaks the signature");
    for (const bad of [undefined, "", "x", `${id}.extra`, id.replace(/.$/, (c) => (c === "A" ? "B" : "A"))])
      assert.equal(sessions.declaredApp(bad, "acme\u0000alice"), false, String(bad));
  });

  it("replicas sharing the key agree", () => {
    const id = createAppSessions("shared").issue("c\u0000s", apps);
    assert.equal(createAppSessions("shared").declaredApp(id, "c\u0000s"), true);
  });
});
