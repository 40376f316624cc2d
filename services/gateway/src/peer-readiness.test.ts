import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { readinessFrom } from "@webcodex/platform";
import { httpReadinessProbe, peerReadinessProbes } from "./peer-readiness.js";

describe("peer readiness probes", () => {
  let peer: http.Server;
  let url = "";
  let answer: { status: number; body: string } = { status: 200, body: "{}" };

  before(async () => {
    peer = http.createServer((_req, res) => res.writeHead(answer.status, { "content-type": "application/json" }).end(answer.body));
    await new Promise<void>((r) => peer.listen(0, "127.0.0.1", () => r()));
    url = `http://127.0.0.1:${(peer.address() as net.AddressInfo).port}`;
  });
  after(async () => {
    await new Promise<void>((r) => peer.close(() => r()));
  });

  it("passes when the peer is ready", async () => {
    answer = { status: 200, body: JSON.stringify({ ready: true, checks: { postgres: { ok: true } } }) };
    await assert.doesNotReject(httpReadinessProbe(url)());
    assert.deepEqual(await readinessFrom(peerReadinessProbes({ audit: url }))(), { ready: true, checks: { audit: { ok: true } } });
  });

  it("names the peer's failing checks and their reasons", async () => {
    answer = {
      status: 503,
      body: JSON.stringify({
        ready: false,
        checks: { redis: { ok: true }, postgres: { ok: false, detail: "unreachable (connect ECONNREFUSED 127.0.0.1:5)" } },
      }),
    };
    await assert.rejects(httpReadinessProbe(url)(), { message: "not ready (503): postgres unreachable (connect ECONNREFUSED 127.0.0.1:5)" });
    answer = { status: 500, body: "oops" };
    await assert.rejects(httpReadinessProbe(url)(), { message: "not ready (500)" });
  });

  it("says when the peer cannot be reached, and the gateway's report names the peer", async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", () => r()));
    const { port } = probe.address() as net.AddressInfo;
    await new Promise<void>((r) => probe.close(() => r()));
    answer = { status: 200, body: "{}" };
    const report = await readinessFrom(peerReadinessProbes({ audit: url, "ref-resolver": `http://127.0.0.1:${port}` }))();
    assert.deepEqual(report, {
      ready: false,
      checks: {
        audit: { ok: true },
        "ref-resolver": { ok: false, detail: `unreachable at http://127.0.0.1:${port} (connect ECONNREFUSED 127.0.0.1:${port})` },
      },
    });
  });
});
