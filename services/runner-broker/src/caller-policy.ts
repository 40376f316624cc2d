/**
 * Who may call what on the broker's network port. Runners call only RegisterRunner and
 * Heartbeat (with their own credential); every other procedure is the control plane's and
 * needs the gateway's service identity. On top of identity, a Dispatch, a route, an Attempt fence relay
 * or a project-state question is answered only for projects the signed principal owns: a call
 * about another tenant's project gets exactly the answer a project that does not exist gets, so
 * the answer reveals neither that it exists nor which root it has.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Interceptor } from "@connectrpc/connect";
import { PipelineStage, ReasonCode, parseCanonicalProjectId, toolFailure, failureToWire } from "@webcodex/contracts";
import {
  DispatchResponseSchema,
  GetProjectRunnerStatesResponseSchema,
  GetRouteResponseSchema,
  RaiseProjectAttemptFenceResponseSchema,
  RunnerBrokerService,
} from "@webcodex/proto";
import type { DispatchRequest, GetFleetStatusRequest, GetProjectRunnerStatesRequest, GetRouteRequest, RaiseProjectAttemptFenceRequest } from "@webcodex/proto";
import { principalFromHeaders, serviceCallerKey } from "@webcodex/platform";
import type { Principal } from "@webcodex/platform";

/** Procedures a Runner calls (with its Runner credential, not a service identity). */
export const RUNNER_PROCEDURES: ReadonlySet<string> = new Set(["RegisterRunner", "Heartbeat"].map((name) => `/${RunnerBrokerService.typeName}/${name}`));

/**
 * Splits Runner registration from the control plane by port: `registration` serves only the
 * Runner procedures, `control` everything else.
 */
export function createPortPolicy(port: "registration" | "control"): Interceptor {
  return (next) => (req) => {
    const isRunner = RUNNER_PROCEDURES.has(`/${req.service.typeName}/${req.method.name}`);
    if (port === "registration" && !isRunner) throw new ConnectError("only Runner registration is served on this port", Code.PermissionDenied);
    if (port === "control" && isRunner) throw new ConnectError("Runners register on the registration port", Code.PermissionDenied);
    return next(req);
  };
}

/** The one service that may ask the broker to act for a principal. */
const GATEWAY = "gateway";

/** Whether `principal` may act on the project `canonicalId` (its owner). */
export function principalOwnsProject(principal: Principal, canonicalId: string): boolean {
  const parsed = parseCanonicalProjectId(canonicalId);
  return parsed !== undefined && parsed.clientId === principal.clientId;
}

/** The broker's failure for a project it has no Runner for and knows nothing about. */
const noLiveRunner = () =>
  failureToWire(
    toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, {
      detail_code: "no_live_runner",
      message: "No Runner is serving this project right now; nothing was run.",
    }),
  );

/**
 * The broker's answer for a project it has no Runner for and knows nothing about: what a
 * Dispatch for another tenant's project gets too.
 */
export function noSuchProjectAnswer() {
  return create(DispatchResponseSchema, { resultJson: "", failure: noLiveRunner() });
}

/** The same answer to an Attempt fence relay: no Runner was told. */
function noSuchProjectFenceAnswer() {
  return create(RaiseProjectAttemptFenceResponseSchema, { highest: 0n, failure: noLiveRunner() });
}

/**
 * The broker's caller policy; installed after the service-identity interceptor, which sets
 * the verified caller. With `requireIdentity` false (no service key configured) identity is
 * not checked, but the ownership rules still hold.
 */
export function createBrokerCallerPolicy(options: { requireIdentity: boolean }): Interceptor {
  return (next) => async (req) => {
    if (req.service.typeName !== RunnerBrokerService.typeName) return next(req);
    const procedure = `/${req.service.typeName}/${req.method.name}`;
    if (RUNNER_PROCEDURES.has(procedure)) return next(req);
    if (options.requireIdentity && req.contextValues.get(serviceCallerKey) !== GATEWAY) {
      throw new ConnectError("this procedure is for the gateway", Code.PermissionDenied);
    }
    const principal = principalFromHeaders(req.header);
    // Answered here; the response carries the content type the request was sent with, as the protocol's own answer would.
    const answer = (message: object) => {
      const header = new Headers({ "content-type": req.header.get("content-type") ?? "application/proto" });
      return { stream: false, service: req.service, method: req.method, header, trailer: new Headers(), message } as never;
    };
    switch (req.method.name) {
      case "Dispatch": {
        const message = req.message as DispatchRequest;
        return principalOwnsProject(principal, message.projectCanonicalId) ? next(req) : answer(noSuchProjectAnswer());
      }
      case "GetRoute": {
        // A route (and its credential) only for the principal's own projects.
        const message = req.message as GetRouteRequest;
        return principalOwnsProject(principal, message.projectCanonicalId) ? next(req) : answer(create(GetRouteResponseSchema, { failure: noLiveRunner() }));
      }
      case "RaiseProjectAttemptFence": {
        const message = req.message as RaiseProjectAttemptFenceRequest;
        return principalOwnsProject(principal, message.projectCanonicalId) ? next(req) : answer(noSuchProjectFenceAnswer());
      }
      case "GetFleetStatus": {
        // Scoped to the caller's own Runners, whatever the request asked for.
        (req.message as GetFleetStatusRequest).clientId = principal.clientId;
        return next(req);
      }
      case "GetProjectRunnerStates": {
        const message = req.message as GetProjectRunnerStatesRequest;
        const foreign = message.projects.filter((p) => !principalOwnsProject(principal, p.projectCanonicalId));
        message.projects = message.projects.filter((p) => principalOwnsProject(principal, p.projectCanonicalId));
        const res = await next(req);
        if (foreign.length === 0 || res.stream) return res;
        const states = { ...(res.message as unknown as { states: Record<string, string> }).states };
        for (const p of foreign) states[p.projectCanonicalId] = "none";
        return { ...res, message: create(GetProjectRunnerStatesResponseSchema, { states }) } as never;
      }
      default:
        return next(req);
    }
  };
}
