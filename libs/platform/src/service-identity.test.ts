import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import type { HandlerContext, Interceptor } from "@connectrpc/connect";
import { AuditService, ToolRegistryService } from "@webcodex/proto";
import { principalHeaders } from "./principal.js";
import { ConfigError } from "./config.js";
import { SERVICE_KEY_ENV, SERVICE_TOKEN_HEADER, createServiceIdentity, defaultBindHost, serviceCallerKey, serviceIdentityFromEnv } from "./service-identity.js";

const KEY = "k".repeat(40);

/** A ToolRegistry whose ListTools reports the verified caller in its catalog version. */
function setup(server: Interceptor[], client: Interceptor[]) {
  const transport = createRouterTransport(
    ({ service }) => {
      service(ToolRegistryService, {
        getAdmittedCatalog: (_req: unknown, ctx: HandlerContext) => ({
          catalogVersion: `${ctx.values.get(serviceCallerKey) ?? "none"}|${ctx.requestHeader.get("x-webcodex-client-id") ?? ""}`,
        }),
      } as never);
    },
    { router: { interceptors: server }, transport: { interceptors: client } },
  );
  return createClient(ToolRegistryService, transport);
}

const unauthenticated = (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated;
/** Refused Unauthenticated with a message saying why. */
const refused = (why: RegExp) => (e: unknown) => unauthenticated(e) && why.test((e as ConnectError).rawMessage);

/** The token a client interceptor puts on a request to `url`, decoded. */
async function tokenFor(identity: ReturnType<typeof createServiceIdentity>, url: string, headers: Record<string, string> = {}) {
  const header = new Headers(headers);
  await identity.clientInterceptor(async (req) => req as never)({ url, header } as never);
  const [version, body] = (header.get(SERVICE_TOKEN_HEADER) ?? "").split(".");
  return { version, payload: JSON.parse(Buffer.from(body ?? "", "base64url").toString()) as { iss: string; aud: string; exp: number; hdr: unknown } };
}

describe("service identity", () => {
  const gateway = createServiceIdentity({ service: "gateway", key: KEY });
  const receiver = createServiceIdentity({ service: "tool-registry", key: KEY });

  it("a signed call reaches the handler with the caller's name and the signed principal", async () => {
    const client = setup([receiver.serverInterceptor()], [gateway.clientInterceptor]);
    const res = await client.getAdmittedCatalog({}, { headers: principalHeaders({ clientId: "acme", subject: "alice" }) });
    assert.equal(res.catalogVersion, "gateway|acme");
  });

  it("a call without a token, with a token of another key, or with a principal header changed after signing is refused", async () => {
    await assert.rejects(
      setup([receiver.serverInterceptor()], []).getAdmittedCatalog({}, { headers: principalHeaders({ clientId: "acme", subject: "a" }) }),
      unauthenticated,
    );
    const forger = createServiceIdentity({ service: "gateway", key: "f".repeat(40) });
    await assert.rejects(setup([receiver.serverInterceptor()], [forger.clientInterceptor]).getAdmittedCatalog({}), unauthenticated);
    const swap: Interceptor = (next) => (req) => {
      req.header.set("x-webcodex-client-id", "victim");
      return next(req);
    };
    // Signed first, then the header is swapped (a man in the middle, or a confused proxy).
    await assert.rejects(
      setup([receiver.serverInterceptor()], [gateway.clientInterceptor, swap]).getAdmittedCatalog(
        {},
        { headers: principalHeaders({ clientId: "acme", subject: "a" }) },
      ),
      unauthenticated,
    );
    const added: Interceptor = (next) => (req) => {
      req.header.set("x-webcodex-tenant", "other");
      return next(req);
    };
    await assert.rejects(
      setup([receiver.serverInterceptor()], [gateway.clientInterceptor, added]).getAdmittedCatalog(
        {},
        { headers: principalHeaders({ clientId: "acme", subject: "a" }) },
      ),
      unauthenticated,
    );
  });

  it("a token expires, and the sender binds it to the procedure it calls", async () => {
    const t = Date.now();
    const past = createServiceIdentity({ service: "gateway", key: KEY, now: () => t - 5 * 60_000 });
    await assert.rejects(setup([receiver.serverInterceptor()], [past.clientInterceptor]).getAdmittedCatalog({}), unauthenticated);
    const replay: Interceptor = (next) => (req) => {
      const token = req.header.get("x-webcodex-service-token") ?? "";
      const [, body] = token.split(".");
      const payload = JSON.parse(Buffer.from(body ?? "", "base64url").toString()) as { aud: string };
      if (payload.aud !== "/webcodex.toolregistry.v1.ToolRegistryService/GetAdmittedCatalog") throw new ConnectError(`aud ${payload.aud}`, Code.Internal);
      return next(req);
    };
    const ok = await setup([replay, receiver.serverInterceptor()], [gateway.clientInterceptor]).getAdmittedCatalog({});
    assert.equal(ok.catalogVersion, "gateway|");
  });

  it("a token captured on one procedure is refused when replayed against another", async () => {
    // An audit service whose two procedures report what reached them.
    const reached: string[] = [];
    const transport = (client: Interceptor[]) =>
      createRouterTransport(
        ({ service }) => {
          service(AuditService, {
            listActions: () => {
              reached.push("list");
              return {};
            },
            recordActions: () => {
              reached.push("record");
              return {};
            },
          } as never);
        },
        { router: { interceptors: [receiver.serverInterceptor()] }, transport: { interceptors: client } },
      );
    let captured = "";
    const capture: Interceptor = (next) => (req) => {
      captured = req.header.get(SERVICE_TOKEN_HEADER) ?? "";
      return next(req);
    };
    const headers = principalHeaders({ clientId: "acme", subject: "alice" });
    await createClient(AuditService, transport([gateway.clientInterceptor, capture])).listActions({}, { headers });
    assert.match(captured, /^v1\./);
    // The captured token, sent again unchanged with the very headers it signed (no signing client).
    const replayed = { headers: { ...headers, [SERVICE_TOKEN_HEADER]: captured } };
    const unsigned = createClient(AuditService, transport([]));
    // Against its own procedure, within its lifetime, it still verifies: only the procedure differs below.
    await unsigned.listActions({}, replayed);
    await assert.rejects(unsigned.recordActions({}, replayed), (e: unknown) => unauthenticated(e) && /another procedure/.test((e as ConnectError).rawMessage));
    assert.deepEqual(reached, ["list", "list"]);
  });

  it("the sender binds the procedure of an absolute or a path URL, under any base path, and signs only x-webcodex-* headers", async () => {
    const t = 1_700_000_000_000;
    const at = createServiceIdentity({ service: "gateway", key: KEY, now: () => t });
    const absolute = await tokenFor(at, "http://broker:8080/base/webcodex.audit.v1.AuditService/ListActions", {
      "x-webcodex-client-id": "acme",
      "content-type": "application/proto",
      "x-webcodex-runner-token": "wcr1.x",
    });
    assert.equal(absolute.version, "v1");
    assert.deepEqual(absolute.payload, {
      iss: "gateway",
      aud: "/webcodex.audit.v1.AuditService/ListActions",
      exp: t + 60_000,
      hdr: [["x-webcodex-client-id", "acme"]],
    });
    assert.equal((await tokenFor(at, "/webcodex.audit.v1.AuditService/RecordActions")).payload.aud, "/webcodex.audit.v1.AuditService/RecordActions");
  });

  it("refusals say why: no token, a bad signature or version, an expired token, changed headers", async () => {
    const headers = principalHeaders({ clientId: "acme", subject: "a" });
    await assert.rejects(setup([receiver.serverInterceptor()], []).getAdmittedCatalog({}, { headers }), refused(/service identity required/));
    let captured = "";
    const capture: Interceptor = (next) => (req) => {
      captured = req.header.get(SERVICE_TOKEN_HEADER) ?? "";
      return next(req);
    };
    await setup([receiver.serverInterceptor()], [gateway.clientInterceptor, capture]).getAdmittedCatalog({}, { headers });
    const send = (token: string) =>
      setup([receiver.serverInterceptor()], []).getAdmittedCatalog({}, { headers: { ...headers, [SERVICE_TOKEN_HEADER]: token } });
    const [, body, signature] = captured.split(".");
    // The signature covers "v1." too: the same body and signature under another version are refused.
    await assert.rejects(send(`v2.${body}.${signature}`), refused(/invalid service token/));
    await assert.rejects(send(`v1.${body}.${signature}x`), refused(/invalid service token/));
    await assert.rejects(send(`v1.${body}`), refused(/invalid service token/));
    await assert.rejects(send("v1.e30.c2ln"), refused(/invalid service token/));
    const swap: Interceptor = (next) => (req) => {
      req.header.set("x-webcodex-client-id", "victim");
      return next(req);
    };
    await assert.rejects(
      setup([receiver.serverInterceptor()], [gateway.clientInterceptor, swap]).getAdmittedCatalog({}, { headers }),
      refused(/differ from the signed/),
    );
    const stale = createServiceIdentity({ service: "gateway", key: KEY, now: () => Date.now() - 5 * 60_000 });
    await assert.rejects(setup([receiver.serverInterceptor()], [stale.clientInterceptor]).getAdmittedCatalog({}), refused(/expired service token/));
  });

  it("headers other than x-webcodex-*, and the Runner credential, may be set after signing", async () => {
    const late: Interceptor = (next) => (req) => {
      req.header.set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
      req.header.set("x-webcodex-runner-token", "wcr1.credential");
      return next(req);
    };
    const res = await setup([receiver.serverInterceptor()], [gateway.clientInterceptor, late]).getAdmittedCatalog(
      {},
      { headers: principalHeaders({ clientId: "acme", subject: "a" }) },
    );
    assert.equal(res.catalogVersion, "gateway|acme");
  });

  it("a token is accepted from 30 s past its expiry to 90 s before it, and refused a millisecond outside", async () => {
    const T = 1_700_000_000_000;
    const receiverAt = createServiceIdentity({ service: "tool-registry", key: KEY, now: () => T });
    // A sender whose clock reads `s` signs a token expiring at s + 60 s.
    const sentAt = (s: number) =>
      setup([receiverAt.serverInterceptor()], [createServiceIdentity({ service: "gateway", key: KEY, now: () => s }).clientInterceptor]).getAdmittedCatalog({});
    const TTL = 60_000;
    const SKEW = 30_000;
    assert.equal((await sentAt(T - SKEW - TTL)).catalogVersion, "gateway|");
    await assert.rejects(sentAt(T - SKEW - TTL - 1), refused(/expired service token/));
    assert.equal((await sentAt(T + SKEW)).catalogVersion, "gateway|");
    await assert.rejects(sentAt(T + SKEW + 1), refused(/expired service token/));
  });

  it("reads the key from the environment: none or empty means unsigned, a short one is a configuration error", () => {
    assert.equal(serviceIdentityFromEnv("gateway", {}), undefined);
    assert.equal(serviceIdentityFromEnv("gateway", { [SERVICE_KEY_ENV]: "" }), undefined);
    assert.throws(
      () => serviceIdentityFromEnv("gateway", { [SERVICE_KEY_ENV]: "short" }),
      (e: unknown) => e instanceof ConfigError && /WEBCODEX_SERVICE_KEY: the service key must be at least 32 characters/.test(e.message),
    );
    assert.equal(serviceIdentityFromEnv("gateway", { [SERVICE_KEY_ENV]: KEY })?.service, "gateway");
  });

  it("open procedures pass without a token and without a caller", async () => {
    const client = setup([receiver.serverInterceptor(new Set(["/webcodex.toolregistry.v1.ToolRegistryService/GetAdmittedCatalog"]))], []);
    assert.equal((await client.getAdmittedCatalog({})).catalogVersion, "none|");
  });

  it("a short key is refused", () => {
    assert.throws(() => createServiceIdentity({ service: "gateway", key: "short" }), /at least 32/);
    assert.throws(() => createServiceIdentity({ service: "gateway", key: "k".repeat(31) }), /at least 32/);
    assert.equal(createServiceIdentity({ service: "gateway", key: "k".repeat(32) }).service, "gateway");
  });

  it("binds loopback outside Kubernetes and every interface inside", () => {
    assert.equal(defaultBindHost({}), "127.0.0.1");
    assert.equal(defaultBindHost({ KUBERNETES_SERVICE_HOST: "10.0.0.1" }), "0.0.0.0");
  });
});
