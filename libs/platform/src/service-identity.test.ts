import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import type { HandlerContext, Interceptor } from "@connectrpc/connect";
import { AuditService, ToolRegistryService } from "@webcodex/proto";
import { principalHeaders } from "./principal.js";
import { SERVICE_TOKEN_HEADER, createServiceIdentity, defaultBindHost, serviceCallerKey } from "./service-identity.js";

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

  it("open procedures pass without a token and without a caller", async () => {
    const client = setup([receiver.serverInterceptor(new Set(["/webcodex.toolregistry.v1.ToolRegistryService/GetAdmittedCatalog"]))], []);
    assert.equal((await client.getAdmittedCatalog({})).catalogVersion, "none|");
  });

  it("a short key is refused", () => {
    assert.throws(() => createServiceIdentity({ service: "gateway", key: "short" }), /at least 32/);
  });

  it("binds loopback outside Kubernetes and every interface inside", () => {
    assert.equal(defaultBindHost({}), "127.0.0.1");
    assert.equal(defaultBindHost({ KUBERNETES_SERVICE_HOST: "10.0.0.1" }), "0.0.0.0");
  });
});
