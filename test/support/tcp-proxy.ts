/**
 * A loopback TCP proxy in front of a real server, so a test can take a dependency "down"
 * (refuse and cut every connection) and bring it back without touching the shared server.
 */
import net from "node:net";

export interface TcpProxy {
  readonly port: number;
  /** Cuts every open connection and refuses new ones. */
  down(): Promise<void>;
  /** Accepts connections again on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  const handler = (client: net.Socket) => {
    const upstream = net.connect(targetPort, targetHost);
    sockets.add(client);
    sockets.add(upstream);
    const cleanup = () => { client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream); };
    client.on("error", cleanup).on("close", cleanup);
    upstream.on("error", cleanup).on("close", cleanup);
    client.pipe(upstream);
    upstream.pipe(client);
  };
  let server = net.createServer(handler);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as net.AddressInfo).port;
  const listen = () => new Promise<void>((r) => { server = net.createServer(handler); server.listen(port, "127.0.0.1", () => r()); });
  const stop = () => new Promise<void>((r) => { for (const s of sockets) s.destroy(); sockets.clear(); server.close(() => r()); });
  return { port, down: stop, up: listen, close: stop };
}
