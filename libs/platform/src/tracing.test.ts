import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import type { UnaryRequest, UnaryResponse } from "@connectrpc/connect";
import { createMetrics } from "./metrics.js";
import { createTracingClientInterceptor, createTracingServerInterceptor } from "./tracing.js";

/** The parts of a request the interceptors read. */
const request = {
  service: { typeName: "webcodex.audit.v1.AuditService" },
  method: { name: "RecordActions" },
  header: new Headers(),
} as unknown as UnaryRequest;
const failing = (code: Code) => async (): Promise<UnaryResponse> => {
  throw new ConnectError("no", code);
};

describe("RPC metrics label a Connect code by its wire name", () => {
  it("a failed incoming RPC counts under deadline_exceeded, a good one under ok", async () => {
    const metrics = createMetrics();
    const server = createTracingServerInterceptor({ metrics });
    await assert.rejects(server(failing(Code.DeadlineExceeded))(request));
    await server(async () => ({}) as UnaryResponse)(request);
    const text = metrics.render();
    assert.match(text, /webcodex_rpc_server_requests_total\{code="deadline_exceeded",method="RecordActions",service="webcodex.audit.v1.AuditService"\} 1/);
    assert.match(text, /webcodex_rpc_server_requests_total\{code="ok",method="RecordActions",service="webcodex.audit.v1.AuditService"\} 1/);
    assert.doesNotMatch(text, /code="\d+"|deadlineexceeded/);
  });

  it("a failed outgoing RPC is observed under its wire name", async () => {
    const metrics = createMetrics();
    await assert.rejects(createTracingClientInterceptor({ metrics })(failing(Code.Unavailable))(request));
    assert.match(metrics.render(), /webcodex_rpc_client_seconds_count\{code="unavailable",method="RecordActions",service="webcodex.audit.v1.AuditService"\} 1/);
  });
});
