/**
 * Service identity on internal calls: every RPC a service makes carries a short-lived token
 * signed with the installation's service key (HMAC-SHA256), naming the calling service, bound
 * to the one procedure it is for, and covering every `x-webcodex-*` header of the request (the
 * principal among them). A receiver accepts the request only when the token verifies, has not
 * expired and the headers are exactly the signed ones, so the principal is never taken from a
 * bare header and a pod that does not hold the key (a Runner) cannot call a control-plane
 * service at all. Why signed tokens rather than mTLS: docs/decisions/0006-service-identity.md.
 *
 * The principal is signed as it is sent: its headers are opaque here, so adding a field to
 * the principal needs no change in this file.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { Code, ConnectError, createContextKey } from "@connectrpc/connect";
import type { Interceptor } from "@connectrpc/connect";
import { ConfigError } from "./config.js";

/** Request header carrying the token. */
export const SERVICE_TOKEN_HEADER = "x-webcodex-service-token";
/** Headers not covered by the signature: the token itself, and the Runner credential (checked on its own). */
const UNSIGNED = new Set([SERVICE_TOKEN_HEADER, "x-webcodex-runner-token"]);
const SIGNED_PREFIX = "x-webcodex-";
/** How long a token is valid after it is made; a call is signed when it is sent. */
const TOKEN_TTL_MS = 60_000;
/** Clock skew tolerated between services. */
const SKEW_MS = 30_000;
/** A service key shorter than this is refused: it could be guessed. */
export const MIN_SERVICE_KEY_LENGTH = 32;

/** The service that made the current request, once its token verified (undefined: none or not checked). */
export const serviceCallerKey = createContextKey<string | undefined>(undefined, { description: "calling service" });

export interface ServiceIdentity {
  /** This service's name, signed into every outgoing call. */
  readonly service: string;
  /** Signs outgoing calls (add to a client transport). */
  readonly clientInterceptor: Interceptor;
  /**
   * Verifies incoming calls (add to a server). A call without a valid token is refused
   * Unauthenticated, except for the procedures named in `open` (Runner registration, which
   * has its own credential), which pass with no caller identity.
   */
  serverInterceptor(open?: ReadonlySet<string>): Interceptor;
}

interface TokenPayload {
  /** Calling service. */
  iss: string;
  /** Procedure path ("/pkg.Service/Method"). */
  aud: string;
  /** Expiry, Unix ms. */
  exp: number;
  /** Signed x-webcodex-* headers, sorted by name. */
  hdr: Array<[string, string]>;
}

function signedHeaders(headers: Headers): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  headers.forEach((value, name) => {
    const lower = name.toLowerCase();
    if (lower.startsWith(SIGNED_PREFIX) && !UNSIGNED.has(lower)) out.push([lower, value]);
  });
  return out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

function procedureOf(url: string): string {
  const path = url.startsWith("/") ? url : new URL(url).pathname;
  return path.slice(path.lastIndexOf("/", path.lastIndexOf("/") - 1));
}

/** Checks a configured service key; returns the problem, or undefined when usable. */
export function serviceKeyProblem(key: string): string | undefined {
  return key.length < MIN_SERVICE_KEY_LENGTH ? `the service key must be at least ${MIN_SERVICE_KEY_LENGTH} characters` : undefined;
}

export function createServiceIdentity(options: { service: string; key: string; now?: () => number }): ServiceIdentity {
  const problem = serviceKeyProblem(options.key);
  if (problem !== undefined) throw new Error(problem);
  const now = options.now ?? Date.now;
  const mac = (data: string) => createHmac("sha256", options.key).update(data).digest();

  const sign = (payload: TokenPayload): string => {
    const body = Buffer.from(JSON.stringify(payload)).toString("base64url");
    return `v1.${body}.${mac(`v1.${body}`).toString("base64url")}`;
  };

  const verify = (token: string, procedure: string, headers: Headers): string => {
    const [version, body, signature] = token.split(".");
    if (version !== "v1" || !body || !signature) throw new ConnectError("invalid service token", Code.Unauthenticated);
    const expected = mac(`v1.${body}`);
    const got = Buffer.from(signature, "base64url");
    if (got.length !== expected.length || !timingSafeEqual(got, expected)) throw new ConnectError("invalid service token", Code.Unauthenticated);
    const payload = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as TokenPayload;
    const t = now();
    if (typeof payload.exp !== "number" || payload.exp < t - SKEW_MS || payload.exp > t + TOKEN_TTL_MS + SKEW_MS) {
      throw new ConnectError("expired service token", Code.Unauthenticated);
    }
    if (payload.aud !== procedure) throw new ConnectError("service token is for another procedure", Code.Unauthenticated);
    if (JSON.stringify(payload.hdr) !== JSON.stringify(signedHeaders(headers))) {
      throw new ConnectError("request headers differ from the signed ones", Code.Unauthenticated);
    }
    return payload.iss;
  };

  return {
    service: options.service,
    clientInterceptor: (next) => (req) => {
      req.header.set(
        SERVICE_TOKEN_HEADER,
        sign({ iss: options.service, aud: procedureOf(req.url), exp: now() + TOKEN_TTL_MS, hdr: signedHeaders(req.header) }),
      );
      return next(req);
    },
    serverInterceptor:
      (open = new Set()) =>
      (next) =>
      (req) => {
        const procedure = `/${req.service.typeName}/${req.method.name}`;
        const token = req.header.get(SERVICE_TOKEN_HEADER);
        if (token === null) {
          if (open.has(procedure)) return next(req);
          throw new ConnectError("service identity required", Code.Unauthenticated);
        }
        let caller: string;
        try {
          caller = verify(token, procedure, req.header);
        } catch (error) {
          if (error instanceof ConnectError) throw error;
          throw new ConnectError("invalid service token", Code.Unauthenticated);
        }
        req.contextValues.set(serviceCallerKey, caller);
        return next(req);
      },
  };
}

/** The variable holding the installation's service key (a Secret in Kubernetes; `webcodex up` makes one). */
export const SERVICE_KEY_ENV = "WEBCODEX_SERVICE_KEY";

/**
 * This service's identity from its environment, or undefined when no service key is set (then
 * internal calls are neither signed nor checked, which only a single-process or test setup
 * should run with; services log it at start).
 */
export function serviceIdentityFromEnv(service: string, env: Readonly<Record<string, string | undefined>>): ServiceIdentity | undefined {
  const key = env[SERVICE_KEY_ENV];
  if (key === undefined || key === "") return undefined;
  const problem = serviceKeyProblem(key);
  if (problem !== undefined) throw new ConfigError([`${SERVICE_KEY_ENV}: ${problem}`]);
  return createServiceIdentity({ service, key });
}

/**
 * Where a service listens when WEBCODEX_HOST is not set: every interface inside Kubernetes
 * (the pod network is how peers reach it; NetworkPolicies decide who may), loopback anywhere
 * else, so a developer machine never exposes an internal port to its network.
 */
export function defaultBindHost(env: Readonly<Record<string, string | undefined>>): string {
  return env["KUBERNETES_SERVICE_HOST"] ? "0.0.0.0" : "127.0.0.1";
}
