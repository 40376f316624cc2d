import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { answerRefusedBody, DISCARD_LIMIT_BYTES, readBody } from "./request-body.js";

const LIMIT = 8 * 1024 * 1024;

/** Answers 413 on a refused body (through answerRefusedBody), else 200 with the body's length. */
const handler = (limit: number) => async (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => {
  const body = await readBody(req, limit);
  if (!Buffer.isBuffer(body)) return answerRefusedBody(req, res, body, 413, { refused: body.problem === "too_large" ? "too_large" : body.problem.kind });
  (res as http.ServerResponse).writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify({ length: body.length }));
};

interface RawAnswer {
  head: string;
  /** Whether the server closed the connection (FIN or reset) after answering. */
  closed: boolean;
  /** Bytes the server's socket had read from this connection when it closed. */
  serverRead: number;
}

/** A listening HTTP/1.1 server; `read` resolves each server-side connection's bytesRead at close. */
async function h1Server(limit: number) {
  const server = http.createServer((req, res) => void handler(limit)(req, res));
  const reads: Array<Promise<number>> = [];
  server.on("connection", (socket: net.Socket) => reads.push(new Promise((r) => socket.once("close", () => r(socket.bytesRead)))));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, port: (server.address() as net.AddressInfo).port, reads };
}

/** Sends `body` whole on a raw socket (writing on while the answer comes) and reads the answer. */
function rawPost(port: number, body: Buffer, headers: Record<string, string> = {}): Promise<{ head: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    let text = "";
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      resolve({ head: text.slice(0, text.indexOf("\r\n\r\n")), closed });
      socket.destroy();
    };
    socket.on("data", (d: Buffer) => (text += d.toString("latin1")));
    // The server's FIN after the answer, or the reset once it cuts a connection it did not read to the end.
    socket.on("end", () => finish(true));
    socket.on("error", () => finish(text.includes("\r\n\r\n")));
    socket.on("close", () => finish(true));
    const extra = Object.entries({ "content-length": String(body.length), ...headers })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("");
    socket.write(`POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n${extra}\r\n`);
    socket.write(body, () => undefined);
  });
}

describe("a refused request body is not read to its end", () => {
  let h1: Awaited<ReturnType<typeof h1Server>>;
  before(async () => {
    h1 = await h1Server(LIMIT);
  });
  after(() => {
    h1.server.closeAllConnections();
    h1.server.close();
  });

  const deep = Buffer.from(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${"[".repeat(6 * 1024 * 1024)}}`);

  it("a 6 MiB body refused at its first 100 bytes: 413 with Connection: close, the connection cut, under 1 MiB of it read", async () => {
    const answer = await rawPost(h1.port, deep);
    assert.match(answer.head, /^HTTP\/1\.1 413 /);
    assert.match(answer.head, /\r\nconnection: close/i);
    assert.equal(answer.closed, true);
    const read = await h1.reads.at(-1);
    assert.ok(read !== undefined && read < 1024 * 1024, `the server read ${read} bytes of a ${deep.length}-byte request`);
  });

  it("a declared Content-Length over the limit is refused before its body is read", async () => {
    const big = Buffer.alloc(LIMIT + 1024 * 1024, 0x20);
    const answer = await rawPost(h1.port, big);
    assert.match(answer.head, /^HTTP\/1\.1 413 /);
    assert.equal(answer.closed, true);
    const read = await h1.reads.at(-1);
    assert.ok(read !== undefined && read < 1024 * 1024, `the server read ${read} bytes of a ${big.length}-byte request`);
  });

  it("a small unread remainder is read and discarded: the connection is kept for the next request", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const post = (body: Buffer) =>
      new Promise<{ status: number; text: string; socket: net.Socket }>((resolve, reject) => {
        const req = http.request(
          { port: h1.port, host: "127.0.0.1", path: "/mcp", method: "POST", agent, headers: { "content-length": body.length } },
          (res) => {
            let text = "";
            res.on("data", (d: Buffer) => (text += d.toString()));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, text, socket: req.socket as net.Socket }));
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    try {
      const small = Buffer.from(`${"[".repeat(100)}${" ".repeat(DISCARD_LIMIT_BYTES / 2)}`);
      const first = await post(small);
      assert.equal(first.status, 413);
      assert.deepEqual(JSON.parse(first.text), { refused: "depth" });
      const second = await post(Buffer.from('{"jsonrpc":"2.0"}'));
      assert.equal(second.status, 200);
      assert.deepEqual(JSON.parse(second.text), { length: 17 });
      assert.equal(second.socket, first.socket, "the same connection answered both");
    } finally {
      agent.destroy();
    }
  });

  it("over HTTP/2 the refused stream is closed and the session goes on", async () => {
    const server = http2.createServer((req, res) => void handler(LIMIT)(req, res));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const session = http2.connect(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`);
    const post = (body: Buffer) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const stream = session.request({ ":method": "POST", ":path": "/mcp", "content-type": "application/json", "content-length": body.length });
        let status = 0;
        let text = "";
        stream.on("response", (h) => (status = Number(h[":status"])));
        stream.on("data", (d: Buffer) => (text += d.toString()));
        stream.on("close", () => (status ? resolve({ status, text }) : reject(new Error(`stream closed without an answer (${stream.rstCode})`))));
        stream.on("error", () => undefined);
        stream.end(body);
      });
    try {
      const refused = await post(deep);
      assert.equal(refused.status, 413);
      assert.deepEqual(JSON.parse(refused.text), { refused: "depth" });
      const served = await post(Buffer.from('{"jsonrpc":"2.0"}'));
      assert.equal(served.status, 200);
    } finally {
      session.close();
      server.close();
    }
  });
});
