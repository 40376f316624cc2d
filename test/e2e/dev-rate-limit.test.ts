// `webcodex dev` serving several principals limits each of them by default, as the distributed
// gateway does; one local principal is not limited unless asked. Requests of a JSON-RPC batch
// each take from the sender's bucket, so 40 batches of 32 (1,280) cross the default 600 per minute
// (a bucket of 600, refilled at 10 a second).
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createProjectDir, startDevServer, tempDir } from "../support/index.js";
import type { DevServer } from "../support/index.js";

const servers: DevServer[] = [];
after(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

async function start(tokens: Array<{ token: string; client_id: string; subject: string }> | string, env: Record<string, string> = {}): Promise<DevServer> {
  const projectDir = createProjectDir({ "a.txt": "a\n" }, { name: "limits" });
  let options: { tokensFile: string } | { token: string };
  if (typeof tokens === "string") options = { token: tokens };
  else {
    const tokensFile = join(tempDir("wcx-limit-tokens-"), "tokens.json");
    writeFileSync(tokensFile, JSON.stringify({ tokens }), { mode: 0o600 });
    options = { tokensFile };
  }
  const server = await startDevServer({ projectDir, dataDir: tempDir("wcx-limit-data-"), ...options, env });
  servers.push(server);
  return server;
}

/** Sends 40 batches of 32 tools/list requests; counts the answers that are rate-limit refusals. */
async function flood(server: DevServer, token: string): Promise<{ answered: number; limited: number }> {
  let answered = 0;
  let limited = 0;
  for (let b = 0; b < 40; b++) {
    const body = JSON.stringify(Array.from({ length: 32 }, (_, i) => ({ jsonrpc: "2.0", id: b * 32 + i, method: "tools/list" })));
    const res = await fetch(server.mcpUrl, {
      method: "POST",
      body,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    });
    assert.equal(res.status, 200);
    for (const m of (await res.json()) as Array<{ result?: unknown; error?: { message: string; data?: unknown } }>) {
      answered++;
      if (m.error && /rate_limited/.test(JSON.stringify(m.error))) limited++;
    }
  }
  return { answered, limited };
}

describe("webcodex dev rate limits", () => {
  const a = `t-${randomBytes(12).toString("hex")}`;
  const b = `t-${randomBytes(12).toString("hex")}`;
  const two = [
    { token: a, client_id: "acme", subject: "alice" },
    { token: b, client_id: "acme", subject: "bob" },
  ];

  it("with two principals, each is limited by default: past 600 requests a minute they are refused as rate_limited, and the other principal is not", async () => {
    const server = await start(two);
    const first = await flood(server, a);
    assert.equal(first.answered, 1280);
    assert.ok(first.limited >= 100, `${first.limited} of 1,280 refused`);
    assert.ok(first.answered - first.limited >= 600, "the first 600 are served");
    const other = await flood(server, b);
    assert.ok(other.answered - other.limited >= 600, "the other principal has a bucket of its own");
  });

  it("WEBCODEX_RATE_LIMIT_PER_MINUTE=0 turns the default off", async () => {
    const server = await start(two, { WEBCODEX_RATE_LIMIT_PER_MINUTE: "0" });
    assert.deepEqual(await flood(server, a), { answered: 1280, limited: 0 });
  });

  it("a single local principal is not limited", async () => {
    const token = `t-${randomBytes(12).toString("hex")}`;
    const server = await start(token);
    assert.deepEqual(await flood(server, token), { answered: 1280, limited: 0 });
  });
});
