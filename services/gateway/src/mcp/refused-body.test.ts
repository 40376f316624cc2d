import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { createLogger } from "@webcodex/platform";
import { createStaticTokenAuthenticator } from "../auth.js";
import { createAppSessions } from "./app-session.js";
import type { MultiplexTransport } from "./multiplex-transport.js";
import { createRefusedBodyDrain } from "./refused-body.js";
import type { RefusedBodyDrainOptions } from "./refused-body.js";
import { createStreamableHttpHandler } from "./streamable-http.js";

const TOKEN = "refused-body-test-token";
const LIMIT = 8 * 1024 * 1024;
const MiB = 1024 * 1024;

/** The MCP endpoint as the gateway serves it; every request here is refused before the MCP server would see it. */
async function endpoint(drain: RefusedBodyDrainOptions) {
  const refusedBodies = createRefusedBodyDrain(drain);
  const notReached = new Proxy({} as MultiplexTransport, {
    get: () => {
      throw new Error("a refused request reached the MCP server");
    },
  });
  const handler = createStreamableHttpHandler({
    transport: notReached,
    authenticator: createStaticTokenAuthenticator([{ token: TOKEN, clientId: "acme", subject: "dev" }]),
    allowedHosts: ["127.0.0.1"],
    allowedOrigins: [],
    resourceMetadataUrl: "http://127.0.0.1/.well-known/oauth-protected-resource",
    maxBodyBytes: LIMIT,
    logger: createLogger({ service: "gateway", level: "error" }),
    appSessions: createAppSessions(),
    refusedBodies,
  });
  const sockets: net.Socket[] = [];
  const server = http.createServer((req, res) => void handler(req, res));
  server.on("connection", (s: net.Socket) => sockets.push(s));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, refusedBodies, sockets, port: (server.address() as net.AddressInfo).port };
}

/** A raw HTTP/1.1 client on one connection: requests are written as given, answers collected as text. */
function connection(port: number) {
  const socket = net.connect(port, "127.0.0.1");
  let text = "";
  let closed = false;
  const waiters: Array<() => void> = [];
  const wake = () => waiters.splice(0).forEach((w) => w());
  socket.on("data", (d: Buffer) => ((text += d.toString("latin1")), wake()));
  socket.on("close", () => ((closed = true), wake()));
  socket.on("error", () => undefined);
  const until = (ok: () => boolean, ms: number, what: string) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what} not within ${ms} ms; got: ${text.slice(0, 200)}`)), ms);
      const check = () => (ok() ? (clearTimeout(timer), resolve()) : waiters.push(check));
      check();
    });
  return {
    socket,
    head: (length: number, auth = true) =>
      socket.write(
        `POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n` +
          `${auth ? `authorization: Bearer ${TOKEN}\r\n` : ""}content-length: ${length}\r\n\r\n`,
      ),
    /** Resolves once `n` answers have arrived. */
    answers: (n: number, ms = 10_000) => until(() => (text.match(/HTTP\/1\.1 \d{3} /g) ?? []).length >= n, ms, `${n} answer(s)`),
    closed: (ms: number) => until(() => closed, ms, "the connection's close"),
    statuses: () => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])),
    isClosed: () => closed,
  };
}

/**
 * The most the slow endpoint (2 MiB/s) may have read of a body since it was sent: the rate over
 * the time since, plus what was in flight when the body was refused (the chunks the socket and
 * the HTTP parser had taken already, at most 1 MiB here). A busy machine only reads less.
 */
const readBound = (sentAt: number) => 1 * MiB + 2 * MiB * ((Date.now() - sentAt) / 1000);

const deep = (bytes: number) => {
  const prefix = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`;
  return Buffer.concat([Buffer.from(prefix), Buffer.alloc(bytes - prefix.length, "[")]);
};

describe("the rest of a refused request body", () => {
  let slow: Awaited<ReturnType<typeof endpoint>>;
  let lingering: Awaited<ReturnType<typeof endpoint>>;
  before(async () => {
    slow = await endpoint({ bytesPerSecond: 2 * MiB });
    lingering = await endpoint({ bytesPerSecond: 64 * 1024, maxLingerMs: 300 });
  });
  after(() => {
    for (const e of [slow, lingering]) {
      e.server.closeAllConnections();
      e.server.close();
    }
  });

  it("is answered 413 at once and read at the shared rate to its end; the connection then serves the next request", async () => {
    const body = deep(6 * MiB);
    const c = connection(slow.port);
    const sentAt = Date.now();
    c.head(body.length);
    let written = false;
    c.socket.write(body, () => (written = true));
    await c.answers(1, 5_000);
    assert.deepEqual(c.statuses(), [413]);
    assert.equal(written, false, "the answer came while the 6 MiB body was still being sent");
    // eslint-disable-next-line no-restricted-syntax -- a window in which the body must not be read faster than the rate
    await new Promise((r) => setTimeout(r, 500));
    const server = slow.sockets.at(-1) as net.Socket;
    assert.ok(server.bytesRead < readBound(sentAt), `read ${(server.bytesRead / MiB).toFixed(1)} MiB of it in ${Date.now() - sentAt} ms`);
    assert.equal(slow.refusedBodies.draining, 1);
    // Read to its end (about 3 s): the same connection answers the next request.
    await new Promise<void>((resolve) => {
      const check = () => (slow.refusedBodies.draining === 0 ? resolve() : setTimeout(check, 50));
      check();
    });
    assert.ok(server.bytesRead >= body.length, "the whole body was read");
    c.head(2, false);
    c.socket.write("{}");
    await c.answers(2);
    assert.deepEqual(c.statuses(), [413, 401]);
    assert.equal(c.isClosed(), false);
    c.socket.destroy();
  });

  it("a declared Content-Length over the limit is answered 413 before any of the body is sent", async () => {
    const c = connection(slow.port);
    c.head(LIMIT + 1);
    await c.answers(1, 5_000);
    assert.deepEqual(c.statuses(), [413]);
    c.socket.destroy();
  });

  it("an unauthenticated request's body is not read at full speed either", async () => {
    const body = deep(6 * MiB);
    const c = connection(slow.port);
    const sentAt = Date.now();
    c.head(body.length, false);
    c.socket.write(body);
    await c.answers(1, 5_000);
    assert.deepEqual(c.statuses(), [401]);
    // eslint-disable-next-line no-restricted-syntax -- a window in which the body must not be read at full speed
    await new Promise((r) => setTimeout(r, 300));
    const server = slow.sockets.at(-1) as net.Socket;
    assert.ok(
      server.bytesRead < readBound(sentAt),
      `read ${(server.bytesRead / MiB).toFixed(1)} MiB of a 6 MiB body refused at its headers in ${Date.now() - sentAt} ms`,
    );
    c.socket.destroy();
  });

  it("a remainder not read within the linger limit is cut, after its answer was sent", async () => {
    const c = connection(lingering.port);
    c.head(6 * MiB);
    c.socket.write(deep(6 * MiB));
    await c.answers(1, 5_000);
    assert.deepEqual(c.statuses(), [413]);
    await c.closed(5_000);
    assert.equal(lingering.refusedBodies.draining, 0);
  });
});
