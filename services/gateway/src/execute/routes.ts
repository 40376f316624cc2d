/**
 * Routes: how the gateway reaches a Project's Runner. The broker issues a route per Project
 * incarnation and the gateway keeps it until shortly before it expires. A route has one of two
 * kinds: "direct" (the gateway calls the Runner itself over Connect, with the route's fence
 * and its credential, which that Runner accepts only under the lease it holds) or "relay"
 * (the call goes through the broker's Dispatch, as every call did before routes). Calls that
 * the broker must see (Job starts and observations, a rewrite with a literal fallback, a
 * Project whose Job continuation awaits its fresh turn, a capability the Runner lacks) are
 * relayed whatever the route.
 *
 * A stale direct route is refused by the Runner before anything runs (fence_rejected, detail
 * route_stale) or not reached at all (connection refused): the route is dropped, the broker
 * asked once, and the call re-sent; refused again, the call is relayed through the broker. A call that may have started on the Runner (the connection
 * broke after it was sent) is never re-sent.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import type { RunnerBrokerService, RunnerService } from "@webcodex/proto";
import { failureFromWire, missingCapabilities, PipelineStage, ReasonCode, RunnerCapabilities, toolFailure } from "@webcodex/contracts";
import type { ToolDefinition, ToolFailure } from "@webcodex/contracts";
import { connectCodeName, provenNotSent, ROUTE_CREDENTIAL_HEADER } from "@webcodex/platform";
import type { Logger, Metrics } from "@webcodex/platform";
import { dependencyFailure } from "../call-context.js";

export interface DirectRoute {
  kind: "direct";
  runnerId: string;
  endpointUrl: string;
  fence: number;
  expiresAtMs: number;
  credential: string;
  capabilities: RunnerCapabilities;
  build: string;
  /** The broker must see the Project's next calls (a continuation awaits its fresh turn). */
  observeCalls: boolean;
}
export type Route = DirectRoute | { kind: "relay"; expiresAtMs: number };

/** One Runner call as the dispatch stage makes it. */
export interface RoutedCall {
  callId: string;
  projectCanonicalId: string;
  rootIdentity: string;
  def: ToolDefinition;
  args: Record<string, unknown>;
  attempt?: { taskId: string; fence: bigint } | undefined;
  /** Set when the call has a literal fallback (a rewrite the Runner may not serve): relayed. */
  hasFallback: boolean;
  signal: AbortSignal;
}

/** What the direct attempt came to: an answer (as Dispatch would give), or "relay" (use Dispatch). */
export type RoutedAnswer = { relay: true } | { relay: false; resultJson: string; failure?: ToolFailure | undefined };

export interface RouteTableOptions {
  broker: Client<typeof RunnerBrokerService>;
  /** Client of the RunnerService at an endpoint (cached per URL here). */
  runnerClient: (endpointUrl: string) => Client<typeof RunnerService>;
  logger: Logger;
  metrics?: Metrics | undefined;
  /** A route is renewed this long before its expiry (default 5000 ms). */
  renewBeforeMs?: number;
  /** A relay answer is kept this long before the broker is asked again (default 5000 ms). */
  relayTtlMs?: number;
  /** Deadline of one direct Runner call (default 660 s, as the broker's). */
  callTimeoutMs?: number;
  now?: () => number;
}

export interface RouteTable {
  /** Runs `call` on its Project's Runner over a direct route, or says to relay it. Never throws. */
  call(call: RoutedCall, headers: Record<string, string>): Promise<RoutedAnswer>;
  /** Drops the cached route of a Project (its next call asks the broker). */
  forget(projectCanonicalId: string): void;
  /** Calls made to the broker for routes since start (for the bench's broker calls per warm call). */
  readonly brokerCalls: number;
}

const key = (canonicalId: string, rootIdentity: string) => `${canonicalId}\0${rootIdentity}`;

export function createRouteTable(o: RouteTableOptions): RouteTable {
  const now = o.now ?? Date.now;
  const renewBeforeMs = o.renewBeforeMs ?? 5_000;
  const relayTtlMs = o.relayTtlMs ?? 5_000;
  const routes = new Map<string, Route>();
  const pending = new Map<string, Promise<Route | { failure: ToolFailure; unreachable?: true }>>();
  const clients = new Map<string, Client<typeof RunnerService>>();
  let brokerCalls = 0;
  const brokerCallCounter = o.metrics?.counter("webcodex_gateway_route_requests_total", "Routes the gateway asked the broker for");
  const relayed = o.metrics?.counter("webcodex_gateway_relayed_calls_total", "Runner calls the gateway sent through the broker's Dispatch");
  const direct = o.metrics?.counter("webcodex_gateway_direct_calls_total", "Runner calls the gateway made on direct routes, by outcome");
  const runnerClient = (url: string) => {
    let c = clients.get(url);
    if (!c) clients.set(url, (c = o.runnerClient(url)));
    return c;
  };

  /** The cached route, or one from the broker (one request per Project at a time). */
  const routeFor = (canonicalId: string, rootIdentity: string, headers: Record<string, string>, signal: AbortSignal) => {
    const k = key(canonicalId, rootIdentity);
    const cached = routes.get(k);
    if (cached && cached.expiresAtMs - (cached.kind === "direct" ? renewBeforeMs : 0) > now()) return Promise.resolve(cached);
    let asking = pending.get(k);
    if (!asking) {
      brokerCalls += 1;
      brokerCallCounter?.inc();
      asking = o.broker
        .getRoute({ projectCanonicalId: canonicalId, rootIdentity }, { headers, signal })
        .then((res): Route | { failure: ToolFailure } => {
          if (res.failure || !res.route)
            return { failure: res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch) };
          const r = res.route;
          const route: Route =
            r.kind === "direct"
              ? {
                  kind: "direct",
                  runnerId: r.runnerId,
                  endpointUrl: r.endpointUrl,
                  fence: Number(r.fence),
                  expiresAtMs: Number(r.expiresAtUnixMs),
                  credential: r.credential,
                  capabilities: RunnerCapabilities.fromWire(r.capabilities),
                  build: r.build,
                  observeCalls: r.observeCalls,
                }
              : { kind: "relay", expiresAtMs: now() + relayTtlMs };
          routes.set(k, route);
          return route;
        })
        .catch((error: unknown) => ({ failure: dependencyFailure(error, PipelineStage.dispatch, false), unreachable: true as const }))
        .finally(() => pending.delete(k));
      pending.set(k, asking);
    }
    // A renewal the broker could not be reached for keeps a direct route that has not expired
    // yet (its Runner's fence still guards every call); an answer from the broker always wins.
    if (cached?.kind !== "direct") return asking;
    return asking.then((r) => ("failure" in r && r.unreachable && cached.expiresAtMs > now() && routes.get(k) === cached ? cached : r));
  };

  const mustRelay = (c: RoutedCall, route: DirectRoute) =>
    route.observeCalls || c.hasFallback || c.def.jobs !== undefined || missingCapabilities(c.def, c.args, route.capabilities).length > 0;

  return {
    get brokerCalls() {
      return brokerCalls;
    },
    forget(projectCanonicalId) {
      for (const k of routes.keys()) if (k.startsWith(`${projectCanonicalId}\0`)) routes.delete(k);
    },
    async call(c, headers) {
      const k = key(c.projectCanonicalId, c.rootIdentity);
      for (let attempt = 0; ; attempt++) {
        const route = await routeFor(c.projectCanonicalId, c.rootIdentity, headers, c.signal);
        if ("failure" in route) {
          return { relay: false, resultJson: "", failure: route.failure };
        }
        if (route.kind === "relay" || mustRelay(c, route)) {
          relayed?.inc();
          return { relay: true };
        }
        const retry = (why: string) => {
          if (routes.get(k) === route) routes.delete(k);
          o.logger.info("route dropped", { project: c.projectCanonicalId, runner_id: route.runnerId, fence: route.fence, why });
          return attempt === 0;
        };
        try {
          const res = await runnerClient(route.endpointUrl).execute(
            {
              callId: c.callId,
              tool: c.def.name,
              argumentsJson: JSON.stringify(c.args),
              rootIdentity: c.rootIdentity,
              fence: BigInt(route.fence),
              ...(c.attempt ? { attempt: c.attempt } : {}),
            },
            { headers: { [ROUTE_CREDENTIAL_HEADER]: route.credential }, signal: c.signal, timeoutMs: o.callTimeoutMs ?? 660_000 },
          );
          // Refused by its fence before anything ran: another Runner holds the Project now.
          if (res.failure?.reasonCode === ReasonCode.fenceRejected && res.failure.detailCode === "route_stale") {
            direct?.inc({ outcome: "stale" });
            if (retry("route_stale")) continue;
            // Refused again on the broker's fresh route (the Runner's lease lapsed on its side,
            // say its renewal was late): nothing ran, so the broker, which owns the lease, takes it.
            relayed?.inc();
            return { relay: true };
          }
          direct?.inc({ outcome: "answered" });
          return { relay: false, resultJson: res.resultJson, ...(res.failure ? { failure: failureFromWire(res.failure) } : {}) };
        } catch (error) {
          const ce = ConnectError.from(error);
          // Never sent (nothing listens there), or refused at the door (a credential for
          // another Runner at that address): nothing ran, so the call may go again.
          const notStarted = provenNotSent(error) || ce.code === Code.Unauthenticated;
          direct?.inc({ outcome: notStarted ? "not_sent" : "broken" });
          if (notStarted) {
            if (retry(connectCodeName(ce.code))) continue;
            return {
              relay: false,
              resultJson: "",
              failure: toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, {
                detail_code: "runner_unreachable",
                message: "The project's Runner is not reachable; nothing was run.",
              }),
            };
          }
          routes.delete(k);
          if (c.signal.aborted) o.logger.info("runner call cancelled by the caller", { runner_id: route.runnerId, tool: c.def.name });
          else o.logger.warn("direct runner call failed", { runner_id: route.runnerId, code: connectCodeName(ce.code), tool: c.def.name });
          // It may have started: never re-sent; its outcome is unknown unless it only read.
          return {
            relay: false,
            resultJson: "",
            failure: toolFailure(ReasonCode.runnerLost, PipelineStage.dispatch, {
              detail_code: "runner_connection_lost",
              outcome_unknown: c.def.effect !== "read_only",
              message: "The connection to the Runner broke during the call.",
            }),
          };
        }
      }
    },
  };
}
