/**
 * Telemetry of the real distributed stack (six processes, HTTP/2, real Postgres and Redis, a
 * real MCP client): a test OTLP collector receives ONE trace for one tools/call whose spans
 * come from every service — gateway, tool-registry, ref-resolver, runner-broker, runner,
 * audit — parented into one tree under the gateway's `tools/call` span, with one child span
 * per pipeline stage. And every service answers Prometheus `/metrics`.
 *
 * The call is the first tools/call of a fresh gateway (so its catalog comes from the
 * tool-registry inside the call) and an effectful one (edit_project_files create), whose
 * audit write is synchronous; a read-only call's record is delivered in a batch, in a span
 * linked to the call rather than parented by it.
 *
 * A second call carries the caller's trace context in params._meta, as MCP clients send it:
 * its span carries the MCP semantic-convention attributes (mcp.method.name, mcp.session.id,
 * gen_ai.tool.name, jsonrpc.request.id), and the caller's trace id reaches the run_shell Job's
 * environment in the Runner process (TRACEPARENT), parented by a span the Runner exported.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { projectIdFor, SERVICES } from "@webcodex/cli";
import type { DistributedStack } from "@webcodex/cli";
import {
  backingServices,
  callTool,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  spanAttribute,
  startOtlpCollector,
  startTestStack,
} from "../support/index.js";
import type { OtlpCollector, OtlpSpan, TestDatabase, ToolOutcome } from "../support/index.js";

const token = `t-${randomBytes(16).toString("hex")}`;
const SERVICE_NAMES = SERVICES.map((s) => `webcodex-${s}`);

describe("telemetry of the distributed stack", () => {
  let collector: OtlpCollector;
  let database: TestDatabase;
  let stack: DistributedStack;
  let client: Client;
  let edit: ToolOutcome;
  let project: string;

  before(async () => {
    collector = await startOtlpCollector();
    const services = await backingServices();
    database = await createTestDatabase();
    const projectDir = createProjectDir({ "README.md": "# traced\n" }, { name: "tracedemo" });
    stack = await startTestStack({
      postgresUrl: database.url,
      redisUrl: services.redisUrl,
      projectDir,
      gatewayEnv: { WEBCODEX_DEV_TOKEN: token },
      extraEnv: {
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_BSP_SCHEDULE_DELAY: "50",
        OTEL_METRIC_EXPORT_INTERVAL: "500",
        OTEL_NODE_RESOURCE_DETECTORS: "none",
        OTEL_EXPORTER_OTLP_TIMEOUT: "1000",
      },
    });
    client = await connectMcp(stack.mcpUrl, token);
    // The first tools/call of this gateway: addressed by canonical id, so nothing runs before it.
    project = `agent:local:${projectIdFor(projectDir)}`;
    edit = await callTool(client, "edit_project_files", { project, changes: [{ kind: "create", path: "traced.txt", content: "hello\n" }] });
  });

  after(async () => {
    await client?.close();
    await stack?.stop();
    await collector?.close();
    await database?.drop();
  });

  /** The spans of the trace rooted at the gateway's tools/call span, once every service has exported its part. */
  async function callTrace(): Promise<{ root: OtlpSpan | undefined; spans: OtlpSpan[] }> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const root = collector.spans().find((s) => s.name === "tools/call edit_project_files" && spanAttribute(s, "webcodex.tool") === "edit_project_files");
      const spans = root ? collector.spans().filter((s) => s.traceId === root.traceId) : [];
      const services = new Set(spans.map((s) => s.service));
      if (SERVICE_NAMES.every((n) => services.has(n)) || Date.now() > deadline) return { root, spans };
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  it("one tools/call yields one trace whose spans cover all six services, in one tree", async () => {
    assert.equal(edit.isError, false, JSON.stringify(edit.result));
    const { root, spans } = await callTrace();
    assert.ok(root, "the gateway exported the tools/call span");
    assert.equal(root.service, "webcodex-gateway");
    assert.equal(root.parentSpanId ?? "", "", "tools/call is the root of its trace");
    assert.deepEqual(
      [...new Set(spans.map((s) => s.service))].sort(),
      [...SERVICE_NAMES].sort(),
      `services in the trace: ${JSON.stringify(spans.map((s) => [s.service, s.name]))}`,
    );

    // Every span hangs off the root: each parent is in the same trace.
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const chainToRoot = (s: OtlpSpan): string[] => {
      const names = [s.name];
      for (let p = s.parentSpanId ? byId.get(s.parentSpanId) : undefined; p; p = p.parentSpanId ? byId.get(p.parentSpanId) : undefined) names.push(p.name);
      return names;
    };
    for (const s of spans)
      assert.equal(chainToRoot(s).at(-1), "tools/call edit_project_files", `${s.service} ${s.name} is not under the call: ${chainToRoot(s).join(" <- ")}`);

    // One child span per pipeline stage, directly under the call.
    const stages = spans.filter((s) => s.parentSpanId === root.spanId && spanAttribute(s, "webcodex.stage") !== undefined).map((s) => s.name);
    assert.deepEqual([...stages].sort(), ["dispatch", "normalization", "projection", "record", "resolution"]);

    // The hops: registry inside the call, the Runner under the broker's dispatch, the audit write under the record stage.
    const server = (service: string) => spans.find((s) => s.kind === 2 && spanAttribute(s, "webcodex.service") === service);
    for (const service of ["tool-registry", "ref-resolver", "runner-broker", "runner", "audit"]) assert.ok(server(service), `a SERVER span of ${service}`);
    assert.ok(chainToRoot(server("runner") as OtlpSpan).includes("dispatch"), "the Runner ran inside the dispatch stage");
    assert.ok(chainToRoot(server("audit") as OtlpSpan).includes("record"), "the audit write happened inside the record stage");
    assert.equal(spanAttribute(server("audit") as OtlpSpan, "rpc.method"), "RecordActions");

    // Nothing of the call leaked arguments into span attributes.
    assert.doesNotMatch(JSON.stringify(spans.map((s) => s.attributes)), /traced\.txt|hello|tracedemo/);
  });

  it("every service serves Prometheus /metrics; the gateway counts the call and its stages", async () => {
    for (const service of SERVICES) {
      const res = await fetch(`http://127.0.0.1:${stack.ports[service]}/metrics`);
      assert.equal(res.status, 200, service);
      const text = await res.text();
      assert.match(text, /^# TYPE process_resident_memory_bytes gauge$/m, service);
      // The gateway serves MCP, not Connect; every other service answered RPCs of the call.
      if (service !== "gateway") assert.match(text, /webcodex_rpc_server_requests_total\{/, `${service} counts incoming RPCs`);
    }
    const gateway = await (await fetch(`http://127.0.0.1:${stack.ports.gateway}/metrics`)).text();
    assert.match(gateway, /webcodex_tool_calls_total\{outcome="success",tool="edit_project_files"\} 1/);
    for (const stage of ["normalization", "resolution", "dispatch", "projection", "record"])
      assert.match(gateway, new RegExp(`webcodex_tool_call_stage_seconds_count\\{stage="${stage}"\\} 1`));
    assert.match(gateway, /webcodex_rpc_client_seconds_count\{code="ok",method="RecordActions"/);
    // The broker's work metrics: Jobs by state (none running here) and lease operations (the Runner's lease).
    const broker = await (await fetch(`http://127.0.0.1:${stack.ports["runner-broker"]}/metrics`)).text();
    assert.match(broker, /^webcodex_jobs\{state="running"\} 0$/m);
    assert.match(broker, /^webcodex_lease_operations_total\{op="acquire",result="ok"\} [1-9]\d*$/m);
  });

  it("a call with traceparent in params._meta: its span carries the MCP attributes and the caller's trace, down to the run_shell Job's TRACEPARENT in the Runner", async () => {
    const traceId = randomBytes(16).toString("hex");
    const parentId = randomBytes(8).toString("hex");
    const marker = `marker-${randomBytes(6).toString("hex")}`;
    const res = await client.callTool({
      name: "run_shell",
      arguments: { project, command: `echo "tp=$TRACEPARENT ${marker}"`, wait_ms: 30_000 },
      _meta: { traceparent: `00-${traceId}-${parentId}-01`, tracestate: "vendor=1" },
    });
    assert.notEqual(res.isError, true, JSON.stringify(res.structuredContent));
    const m = new RegExp(`tp=00-${traceId}-([0-9a-f]{16})-01`).exec(JSON.stringify(res.structuredContent));
    assert.ok(m, `the Job's TRACEPARENT carries the caller's trace id: ${JSON.stringify(res.structuredContent)}`);
    const jobParent = m[1] as string;

    // Every process exports its part of the caller's trace: the gateway, the broker, the Runner.
    const deadline = Date.now() + 20_000;
    let spans: OtlpSpan[] = [];
    for (;;) {
      spans = collector.spans().filter((s) => s.traceId === traceId);
      const services = new Set(spans.map((s) => s.service));
      const done =
        ["webcodex-gateway", "webcodex-runner-broker", "webcodex-runner"].every((n) => services.has(n)) &&
        spans.some((s) => s.spanId === jobParent) &&
        spans.some((s) => s.name === "tools/call run_shell");
      if (done || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const call = spans.find((s) => s.name === "tools/call run_shell");
    assert.ok(call, `the call joined the caller's trace: ${JSON.stringify(spans.map((s) => [s.service, s.name]))}`);
    assert.equal(call.service, "webcodex-gateway");
    assert.equal(call.parentSpanId, parentId, "a child of the caller's span");
    assert.equal(spanAttribute(call, "mcp.method.name"), "tools/call");
    assert.equal(spanAttribute(call, "gen_ai.tool.name"), "run_shell");
    assert.equal(spanAttribute(call, "gen_ai.operation.name"), "execute_tool");
    assert.match(String(spanAttribute(call, "jsonrpc.request.id")), /^\d+$/);
    const sessionId = (client.transport as StreamableHTTPClientTransport | undefined)?.sessionId;
    assert.ok(sessionId, "the client holds an MCP session id");
    assert.equal(spanAttribute(call, "mcp.session.id"), sessionId, "the span names the client's MCP session");

    const job = spans.find((s) => s.spanId === jobParent);
    assert.ok(job, `the Job's parent span was exported: ${JSON.stringify(spans.map((s) => [s.service, s.name, s.spanId]))}`);
    assert.equal(job.service, "webcodex-runner", "the Job ran under a span of the Runner process");
    assert.deepEqual(
      [...new Set(spans.map((s) => s.service))].filter((n) => ["webcodex-gateway", "webcodex-runner-broker", "webcodex-runner"].includes(n)).sort(),
      ["webcodex-gateway", "webcodex-runner", "webcodex-runner-broker"],
    );
    // The command (an argument) is in no span.
    assert.doesNotMatch(JSON.stringify(spans.map((s) => s.attributes)), new RegExp(marker));
  });
});
