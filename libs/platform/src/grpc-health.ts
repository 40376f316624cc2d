/**
 * The standard gRPC health protocol (grpc.health.v1.Health, from its published .proto) served
 * as a Connect service on every service's port, so Kubernetes native `grpc:` probes, meshes
 * and load balancers see the same readiness as /readyz. Every service a server hosts (by its
 * fully-qualified name) and "" (the server as a whole) follow that readiness; another name is
 * NOT_FOUND for Check and SERVICE_UNKNOWN for Watch, as the protocol defines.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Health } from "@webcodex/proto";
import { HealthCheckResponse_ServingStatus as Status } from "@webcodex/proto";

export interface HealthOptions {
  /** Fully-qualified names of the services this server hosts (e.g. webcodex.toolregistry.v1.ToolRegistryService). */
  services: readonly string[];
  /** Whether the server can serve now (its /readyz checks). */
  ready(): Promise<boolean>;
  /** How often Watch re-checks readiness; a change is streamed at most this late. */
  watchIntervalMs?: number;
}

export function createHealthService(options: HealthOptions): ServiceImpl<typeof Health> {
  const known = new Set(["", ...options.services]);
  const interval = options.watchIntervalMs ?? 1_000;
  const status = async (): Promise<Status> => ((await options.ready().catch(() => false)) ? Status.SERVING : Status.NOT_SERVING);
  return {
    async check(req) {
      if (!known.has(req.service)) throw new ConnectError(`unknown service ${req.service}`, Code.NotFound);
      return { status: await status() };
    },
    async *watch(req, context) {
      if (!known.has(req.service)) {
        // The set of services is fixed for the process: it stays unknown until the client leaves.
        yield { status: Status.SERVICE_UNKNOWN };
        await new Promise<void>((resolve) => context.signal.addEventListener("abort", () => resolve(), { once: true }));
        return;
      }
      let last: Status | undefined;
      while (!context.signal.aborted) {
        const now = await status();
        if (now !== last) {
          last = now;
          yield { status: now };
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, interval);
          context.signal.addEventListener(
            "abort",
            () => {
              clearTimeout(timer);
              resolve();
            },
            { once: true },
          );
        });
      }
    },
  };
}
