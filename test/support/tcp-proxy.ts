/**
 * A loopback TCP proxy in front of a real server, so a test can take a dependency "down" and
 * bring it back without touching the shared server. Down looks like a stopped server from
 * the client's side: the listening socket is closed (new connections get ECONNREFUSED) and
 * every open connection is reset (ECONNRESET); the server side of each is closed.
 */
import net from "node:net";

export interface TcpProxy {
  readonly port: number;
  /** Stops listening and resets every open connection; resolves once the port is closed. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const clients = new Set<net.Socket>();
  const upstreams = new Set<net.Socket>();
  const handler = (client: net.Socket) => {
    const upstream = net.connect(targetPort, targetHost);
    clients.add(client);
    upstreams.add(upstream);
    const cleanup = () => {
      client.destroy();
      upstream.destroy();
      clients.delete(client);
      upstreams.delete(upstream);
    };
    client.on("error", cleanup).on("close", cleanup);
    upstream.on("error", cleanup).on("close", cleanup);
    client.pipe(upstream);
    upstream.pipe(client);
  };
  let server: net.Server | undefined;
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const s = net.createServer(handler);
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => {
        s.off("error", reject);
        server = s;
        resolve((s.address() as net.AddressInfo).port);
      });
    });
  const port = await listen(0);
  const stop = () =>
    new Promise<void>((resolve) => {
      const s = server;
      server = undefined;
      // Closing the listener first: from here on a connect is refused.
      const closed = s ? new Promise<void>((r) => s.close(() => r())) : Promise.resolve();
      for (const c of clients) c.resetAndDestroy();
      for (const u of upstreams) u.destroy();
      clients.clear();
      upstreams.clear();
      void closed.then(resolve);
    });
  return {
    port,
    down: stop,
    up: async () => {
      if (!server) await listen(port);
    },
    close: stop,
  };
}
