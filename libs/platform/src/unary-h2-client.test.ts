import assert from "node:assert/strict";
import net from "node:net";
import { describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RunnerService } from "@webcodex/proto";
import type { HandlerContext } from "@connectrpc/connect";
import type { ExecuteRequest } from "@webcodex/proto";
import { afterAnswer } from "./answer-hooks.js";
import type { AnswerFate } from "./answer-hooks.js";
import { createLogger } from "./logger.js";
import { startServiceServer } from "./server.js";
import { ROUTE_CREDENTIAL_HEADER } from "./route-credential.js";
import { createServiceTransport, provenNotSent } from "./service-transport.js";
import { createServiceIdentity, serviceCallerKey } from "./service-identity.js";
import { createUnaryH2Client } from "./unary-h2-client.js";

const logger = createLogger({ service: "test", level: "silent" });

/**
 * A Runner-shaped server: Execute echoes what it received; "refuse" fails, "throw" throws a plain
 * error, "held" waits until released. `fast`: its unary methods on the fast path (unary-h2-server.ts).
 */
async function echoServer(port = 0, fast = false) {
  let release = () => undefined as void;
  const gate = new Promise<void>((r) => (release = r));
  let entered = () => undefined as void;
  const inside = new Promise<void>((r) => (entered = r));
  const fates: AnswerFate[] = [];
  /** Why a held handler's signal was aborted, per call that saw it. */
  const stopped: Code[] = [];
  /** How many "held" calls the handler has started. */
  const held = { n: 0 };
  /** Why a "tied" call's signal was aborted once the call was over. */
  const over: Code[] = [];
  const service = {
    async execute(req: ExecuteRequest, ctx: HandlerContext) {
      if (req.tool === "refuse") throw new ConnectError("route credential not valid for this Runner", Code.Unauthenticated);
      if (req.tool === "throw") throw new Error("a detail that stays in the process");
      if (req.tool === "tied") ctx.signal.addEventListener("abort", () => over.push(ConnectError.from(ctx.signal.reason).code), { once: true });
      if (req.tool === "held") {
        held.n++;
        entered();
        await Promise.race([gate, new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }))]);
        if (ctx.signal.aborted) stopped.push(ConnectError.from(ctx.signal.reason).code);
      }
      const hooked = afterAnswer((fate) => fates.push(fate));
      return {
        resultJson: JSON.stringify({
          callId: req.callId,
          tool: req.tool,
          args: req.argumentsJson,
          fence: String(req.fence),
          attempt: req.attempt ? { taskId: req.attempt.taskId, fence: String(req.attempt.fence) } : null,
          credential: ctx.requestHeader.get(ROUTE_CREDENTIAL_HEADER),
          deadline: (ctx.timeoutMs() ?? 0) > 59_000,
          hooked,
        }),
      };
    },
  };
  const server = await startServiceServer({
    name: "runner",
    port,
    logger,
    drainMs: 50,
    answerHooks: true,
    routes: (router) => router.service(RunnerService, service),
    ...(fast ? { unaryFastPath: { service: RunnerService, implementation: service } } : {}),
  });
  return { server, release, entered: inside, fates, stopped, held, over };
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const codeOf = async (p: Promise<unknown>): Promise<ConnectError> => {
  try {
    await p;
  } catch (error) {
    assert.ok(error instanceof ConnectError, `a ConnectError, not ${String(error)}`);
    return error;
  }
  assert.fail("the call succeeded");
};

describe("createUnaryH2Client and the unary fast path", () => {
  it("client and server answer exactly as connect-node's do: request fields, headers, deadline, errors, answer hooks; other encodings still served", async () => {
    const plain = await echoServer();
    const fast = await echoServer(0, true);
    try {
      const req = { callId: "c1", tool: "read_files", argumentsJson: '{"files":["ü.txt"]}', fence: 7n, attempt: { taskId: "t1", fence: 3n } };
      const call = { headers: { [ROUTE_CREDENTIAL_HEADER]: "wcrt1.r.7.x.y" }, timeoutMs: 60_000 };
      const clients = (url: string) => [
        createUnaryH2Client(RunnerService, url),
        createClient(RunnerService, createConnectTransport({ baseUrl: url, httpVersion: "2", useBinaryFormat: true })),
        createClient(RunnerService, createConnectTransport({ baseUrl: url, httpVersion: "2", useBinaryFormat: false })),
        createClient(RunnerService, createConnectTransport({ baseUrl: url, httpVersion: "1.1", useBinaryFormat: true })),
      ];
      const all = [...clients(plain.server.url), ...clients(fast.server.url)];
      const answers = await Promise.all(all.map((c) => c.execute(req, call)));
      for (const a of answers) assert.equal(a.resultJson, answers[0]?.resultJson);
      const echoed = JSON.parse(answers[0]?.resultJson ?? "{}") as Record<string, unknown>;
      assert.deepEqual([echoed["fence"], echoed["credential"], echoed["deadline"], echoed["hooked"]], ["7", "wcrt1.r.7.x.y", true, true]);
      await until("every answer's hook ran", () => plain.fates.length + fast.fates.length === all.length);
      assert.deepEqual([...plain.fates, ...fast.fates], Array(all.length).fill("sent"));
      for (const tool of ["refuse", "throw"]) {
        const errors = await Promise.all(all.map((c) => codeOf(c.execute({ tool }))));
        for (const e of errors) assert.deepEqual([e.code, e.rawMessage], [errors[0]?.code, errors[0]?.rawMessage], tool);
        assert.deepEqual(
          [errors[0]?.code, errors[0]?.rawMessage],
          tool === "refuse" ? [Code.Unauthenticated, "route credential not valid for this Runner"] : [Code.Internal, "internal error"],
        );
        assert.equal(provenNotSent(errors[0]), false);
      }
      // What a handler ties to its signal is let go once the call is over, on either path.
      for (const c of all) await c.execute({ tool: "tied" });
      await until("every tied call's signal was aborted", () => plain.over.length + fast.over.length === all.length);
      assert.deepEqual([plain.over, fast.over], [Array(4).fill(Code.Canceled), Array(4).fill(Code.Canceled)]);
      assert.equal(
        (await codeOf(createUnaryH2Client(RunnerService, fast.server.url).execute({ tool: "held" }, { timeoutMs: 100 }))).code,
        Code.DeadlineExceeded,
      );
    } finally {
      plain.release();
      fast.release();
      await Promise.all([plain.server.close(), fast.server.close()]);
    }
  });

  it("runs the same interceptors: a service identity signs on the client and is checked and handed to the handler on the fast path", async () => {
    const key = "k".repeat(40);
    const gateway = createServiceIdentity({ service: "gateway", key });
    const resolver = createServiceIdentity({ service: "ref-resolver", key });
    const service = {
      execute(_req: ExecuteRequest, ctx: HandlerContext) {
        return { resultJson: JSON.stringify({ caller: ctx.values.get(serviceCallerKey) ?? null, principal: ctx.requestHeader.get("x-webcodex-subject") }) };
      },
    };
    const server = await startServiceServer({
      name: "svc",
      port: 0,
      logger,
      interceptors: [resolver.serverInterceptor()],
      routes: (router) => router.service(RunnerService, service),
      unaryFastPath: { service: RunnerService, implementation: service },
    });
    try {
      const headers = { "x-webcodex-subject": "alice" };
      const signed = await createUnaryH2Client(RunnerService, server.url, { identity: gateway }).execute({}, { headers });
      assert.deepEqual(JSON.parse(signed.resultJson), { caller: "gateway", principal: "alice" });
      const generic = await createClient(RunnerService, createServiceTransport(server.url, { identity: gateway })).execute({}, { headers });
      assert.equal(generic.resultJson, signed.resultJson);
      const unsigned = await codeOf(createUnaryH2Client(RunnerService, server.url).execute({}, { headers }));
      assert.deepEqual([unsigned.code, unsigned.rawMessage], [Code.Unauthenticated, "service identity required"]);
      // A token that is not the gateway's signature does not pass.
      const forged = await codeOf(
        createUnaryH2Client(RunnerService, server.url).execute({}, { headers: { ...headers, "x-webcodex-service-token": "forged" } }),
      );
      assert.equal(forged.code, Code.Unauthenticated);
    } finally {
      await server.close();
    }
  });

  it("a connection never made is unavailable and proven not sent; a call cut after it was sent is not", async () => {
    const closed = await new Promise<number>((resolve) => {
      const probe = net.createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as net.AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const refused = await codeOf(createUnaryH2Client(RunnerService, `http://127.0.0.1:${closed}`).execute({ tool: "read_files" }));
    assert.equal(refused.code, Code.Unavailable);
    assert.equal(provenNotSent(refused), true, refused.message);

    const s = await echoServer(0, true);
    const lean = createUnaryH2Client(RunnerService, s.server.url);
    const pending = codeOf(lean.execute({ tool: "held" }));
    await s.entered;
    await s.server.close();
    const cut = await pending;
    s.release();
    assert.equal(cut.code, Code.Unavailable);
    assert.equal(provenNotSent(cut), false, "the request was sent: its outcome is not known");
  });

  it("gives up at its deadline or on abort, and reconnects once the server is back", async () => {
    const s = await echoServer(0, true);
    const port = s.server.port;
    const lean = createUnaryH2Client(RunnerService, s.server.url);
    try {
      assert.equal((await codeOf(lean.execute({ tool: "held" }, { timeoutMs: 100 }))).code, Code.DeadlineExceeded);
      const abort = new AbortController();
      const aborted = codeOf(lean.execute({ tool: "held" }, { signal: abort.signal }));
      await until("the second call is running", () => s.held.n === 2);
      abort.abort();
      assert.equal((await aborted).code, Code.Canceled);
      // The handler saw both: at its deadline (its own timer or the caller's reset, whichever
      // came first), then when its caller went away.
      await until("the handler saw both aborts", () => s.stopped.length === 2);
      assert.ok([Code.DeadlineExceeded, Code.Canceled].includes(s.stopped[0] as Code), String(s.stopped[0]));
      assert.equal(s.stopped[1], Code.Canceled);
    } finally {
      s.release();
      await s.server.close();
    }
    assert.equal((await codeOf(lean.execute({ tool: "read_files" }))).code, Code.Unavailable);
    const again = await echoServer(port, true);
    try {
      const res = await lean.execute({ callId: "after", tool: "read_files" });
      assert.equal((JSON.parse(res.resultJson) as Record<string, unknown>)["callId"], "after");
    } finally {
      await again.server.close();
    }
  });
});
