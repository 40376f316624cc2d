/**
 * A loopback HTTP proxy that adds `Authorization: Bearer <token>` to every request, for MCP
 * clients that cannot send one (the official conformance runner). Everything else, the Host
 * and Origin headers included, is forwarded unchanged, so the gateway's DNS-rebinding checks
 * see what the client sent.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface AuthProxy {
  readonly url: string;
  close(): Promise<void>;
}

export async function startAuthProxy(target: string, token: string): Promise<AuthProxy> {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    const forward = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, authorization: `Bearer ${token}` } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    res.on("close", () => forward.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
