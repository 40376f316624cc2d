/**
 * The test TCP proxy's "down" must look like a stopped server: new connections refused,
 * open ones reset, not merely half-closed. Tests that take Postgres down rely on it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { startTcpProxy } from "../support/index.js";
import type { TcpProxy } from "../support/index.js";

/** Connects and waits for the echo of one line; the error code if the connection fails. */
function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => resolve(s));
    s.once("error", reject);
  });
}
const echo = (s: net.Socket, text: string) =>
  new Promise<string>((resolve, reject) => {
    s.once("data", (d: Buffer) => resolve(d.toString()));
    s.once("error", reject);
    s.write(text);
  });

describe("startTcpProxy", () => {
  let upstream: net.Server;
  let serverSide = 0;
  let proxy: TcpProxy;

  before(async () => {
    upstream = net.createServer((s) => {
      serverSide++;
      s.on("close", () => serverSide--);
      s.on("error", () => undefined);
      s.pipe(s);
    });
    await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", () => r()));
    proxy = await startTcpProxy("127.0.0.1", (upstream.address() as net.AddressInfo).port);
  });
  after(async () => {
    await proxy.close();
    await new Promise<void>((r) => upstream.close(() => r()));
  });

  it("passes bytes through; down resets open connections, refuses new ones and closes the server side; up serves again", async () => {
    const open = await connect(proxy.port);
    assert.equal(await echo(open, "ping"), "ping");
    assert.equal(serverSide, 1);
    // A FIN (end without error) would be a graceful close, not a stopped server.
    const failed = new Promise<string>((resolve) => {
      open.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
      open.once("end", () => resolve("closed gracefully (FIN)"));
    });
    await proxy.down();
    assert.equal(await failed, "ECONNRESET", "an open connection is reset");
    await assert.rejects(connect(proxy.port), { code: "ECONNREFUSED" });
    for (let i = 0; i < 50 && serverSide > 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(serverSide, 0, "the server side of the connection was closed");
    await proxy.up();
    const again = await connect(proxy.port);
    assert.equal(await echo(again, "back"), "back");
    again.destroy();
  });
});
