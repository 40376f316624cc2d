import { describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { createLogger } from "./logger.js";
import { readinessFrom, sendJson, startServiceServer } from "./server.js";
import type { ServiceServerOptions } from "./server.js";

const logger = createLogger({ service: "test", level: "silent" });
const start = (o: Partial<ServiceServerOptions> = {}) => startServiceServer({ name: "svc", port: 0, logger, ...o });

async function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A route that holds its response until `release()`; `entered` resolves once a request is in it. */
function heldRoute(): { entered: Promise<void>; release: () => void; handler: NonNullable<ServiceServerOptions["httpRoutes"]> } {
  let release = () => undefined as void;
  let entered = () => undefined as void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const inside = new Promise<void>((r) => {
    entered = r;
  });
  return {
    entered: inside,
    release,
    handler: {
      "/slow": async (_req, res) => {
        entered();
        await gate;
        sendJson(res, 200, { done: true });
      },
    },
  };
}

function connectResult(port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve("connected");
    });
    s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
  });
}

describe("startServiceServer: health and readiness", () => {
  it("/healthz answers 200 with the service name; /readyz is 200 without checks", async () => {
    const server = await start();
    try {
      assert.deepEqual(await getJson(`${server.url}/healthz`), { status: 200, body: { status: "ok", service: "svc" } });
      assert.deepEqual(await getJson(`${server.url}/readyz`), { status: 200, body: { ready: true, checks: {} } });
      assert.equal((await fetch(`${server.url}/nope`)).status, 404);
    } finally {
      await server.close();
    }
  });

  it("/readyz is 503 naming the failing check and its reason, and 200 once every check passes", async () => {
    let redisUp = false;
    const server = await start({
      readiness: readinessFrom({
        postgres: async () => undefined,
        redis: async () => {
          if (!redisUp) throw new Error("connect ECONNREFUSED 127.0.0.1:6379");
        },
      }),
    });
    try {
      assert.deepEqual(await getJson(`${server.url}/readyz`), {
        status: 503,
        body: { ready: false, checks: { postgres: { ok: true }, redis: { ok: false, detail: "connect ECONNREFUSED 127.0.0.1:6379" } } },
      });
      // /healthz is liveness only: a dependency down does not make the process unhealthy.
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
      redisUp = true;
      assert.deepEqual(await getJson(`${server.url}/readyz`), { status: 200, body: { ready: true, checks: { postgres: { ok: true }, redis: { ok: true } } } });
    } finally {
      await server.close();
    }
  });

  it("/readyz is 503 when the readiness function itself throws, with the error as the reason", async () => {
    const server = await start({ readiness: () => Promise.reject(new Error("probe crashed")) });
    try {
      assert.deepEqual(await getJson(`${server.url}/readyz`), {
        status: 503,
        body: { ready: false, checks: { readiness: { ok: false, detail: "Error: probe crashed" } } },
      });
    } finally {
      await server.close();
    }
  });
});

describe("startServiceServer: graceful shutdown", () => {
  it("HTTP/1.1: a request in flight finishes; new connections are refused and idle ones closed; close waits for it", async () => {
    const held = heldRoute();
    const server = await start({ httpRoutes: held.handler });
    // An idle keep-alive connection, as a Host or a probe leaves one.
    const idle = net.connect(server.port, "127.0.0.1");
    await new Promise<void>((r) => idle.once("connect", () => r()));
    idle.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    await new Promise<void>((r) => idle.once("data", () => r()));
    const idleClosed = new Promise<void>((r) => idle.once("close", () => r()));
    idle.resume();

    const inflight = new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
      const req = http.get(`${server.url}/slow`, { agent: new http.Agent({ keepAlive: true }) }, (res) => {
        let body = "";
        res.on("data", (c: Buffer) => {
          body += c.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
      });
      req.on("error", reject);
    });
    await held.entered;
    let closed = false;
    const closing = server.close().then(() => {
      closed = true;
    });

    await idleClosed;
    assert.equal(await connectResult(server.port), "ECONNREFUSED");
    // eslint-disable-next-line no-restricted-syntax -- a window in which close must NOT finish while the request is in flight
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(closed, false, "close waits for the request in flight");
    held.release();
    assert.deepEqual(await inflight, { status: 200, connection: "close", body: '{"done":true}' });
    await closing;
  });

  it("HTTP/1.1: a request on a connection opened before close but first used after it gets 503 shutting_down and the connection closes", async () => {
    const server = await start();
    const early = net.connect(server.port, "127.0.0.1");
    await new Promise<void>((r) => early.once("connect", () => r()));
    let out = "";
    early.on("data", (c: Buffer) => {
      out += c.toString();
    });
    const ended = new Promise<void>((r) => early.once("close", () => r()));
    const closing = server.close();
    early.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    await ended;
    await closing;
    assert.match(out, /^HTTP\/1\.1 503 /);
    assert.match(out, /connection: close/i);
    assert.match(out, /"error":"shutting_down"/);
  });

  it("HTTP/2: a stream in flight finishes; the session is told to go away and takes no new stream", async () => {
    const held = heldRoute();
    const server = await start({ httpRoutes: held.handler });
    const session = http2.connect(server.url);
    session.on("error", () => undefined);
    const goaway = new Promise<void>((r) => session.once("goaway", () => r()));
    const stream = session.request({ ":path": "/slow" });
    const inflight = new Promise<{ status: number; body: string }>((resolve, reject) => {
      let status = 0;
      let body = "";
      stream.on("response", (h) => {
        status = Number(h[":status"]);
      });
      stream.on("data", (c: Buffer) => {
        body += c.toString();
      });
      stream.on("end", () => resolve({ status, body }));
      stream.on("error", reject);
    });
    await held.entered;
    const closing = server.close();
    await goaway;
    // Node 20 refuses the new stream at once; later releases fail the stream it returns.
    const refused = await new Promise<string>((resolve) => {
      try {
        const late = session.request({ ":path": "/healthz" });
        late.on("error", (e: Error) => resolve(e.message));
        late.on("response", () => resolve("answered"));
      } catch (e) {
        resolve((e as Error).message);
      }
    });
    assert.match(refused, /GOAWAY|closed|destroyed/i);
    assert.equal(await connectResult(server.port), "ECONNREFUSED");
    held.release();
    assert.deepEqual(await inflight, { status: 200, body: '{"done":true}' });
    await closing;
    session.close();
  });
});
