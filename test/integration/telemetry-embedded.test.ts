/**
 * Embedded mode (`webcodex dev`: all services in one process, in-process clients) traces like
 * the distributed stack: one tools/call is one trace whose SERVER spans name every service
 * (`webcodex.service`), each under the pipeline stage that called it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { projectIdFor, startEmbedded } from "@webcodex/cli";
import type { Embedded } from "@webcodex/cli";
import { createLogger, startTelemetry } from "@webcodex/platform";
import type { Telemetry } from "@webcodex/platform";
import { callTool, connectMcp, createProjectDir, seedPgliteCluster, spanAttribute, startOtlpCollector, tempDir } from "../support/index.js";
import type { OtlpCollector, OtlpSpan } from "../support/index.js";

const token = `t-${randomBytes(16).toString("hex")}`;
const IN_PROCESS_SERVICES = ["tool-registry", "ref-resolver", "runner-broker", "runner", "audit"];

describe("tracing in embedded mode", () => {
  let collector: OtlpCollector;
  let telemetry: Telemetry;
  let embedded: Embedded;
  let client: Client;
  let projectDir: string;

  before(async () => {
    collector = await startOtlpCollector();
    // The OpenTelemetry SDK reads its settings from process.env.
    Object.assign(process.env, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_NODE_RESOURCE_DETECTORS: "none" });
    telemetry = await startTelemetry("webcodex-dev", process.env, createLogger({ service: "test", level: "silent" }));
    assert.equal(telemetry.enabled, true);
    projectDir = createProjectDir({ "README.md": "# embedded trace\n" }, { name: "embeddedtrace" });
    const dataDir = tempDir("wcx-embedded-trace-");
    await seedPgliteCluster(dataDir);
    embedded = await startEmbedded({
      projectDir,
      port: 0,
      dataDir,
      tokens: [{ token, clientId: "local", subject: "dev" }],
      clientId: "local",
      logger: createLogger({ service: "test", level: "silent" }),
    });
    client = await connectMcp(embedded.mcpUrl, token);
  });

  after(async () => {
    await client?.close();
    await embedded?.close();
    await telemetry?.shutdown();
    await collector?.close();
  });

  it("one effectful call is one trace with an in-process SERVER span per service, under its stage", async () => {
    const project = `agent:local:${projectIdFor(projectDir)}`;
    const edit = await callTool(client, "edit_project_files", { project, changes: [{ kind: "create", path: "traced.txt", content: "x\n" }] });
    assert.equal(edit.isError, false, JSON.stringify(edit.result));
    await telemetry.flush();

    const root = collector.spans().find((s) => s.name === "tools/call edit_project_files" && spanAttribute(s, "webcodex.tool") === "edit_project_files");
    assert.ok(root, "the tools/call span was exported");
    const spans = collector.spans().filter((s) => s.traceId === root.traceId);
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const ancestors = (s: OtlpSpan): string[] => {
      const names: string[] = [];
      for (let p = s.parentSpanId ? byId.get(s.parentSpanId) : undefined; p; p = p.parentSpanId ? byId.get(p.parentSpanId) : undefined) names.push(p.name);
      return names;
    };
    const serverOf = (service: string) => spans.find((s) => s.kind === 2 && spanAttribute(s, "webcodex.service") === service);
    for (const service of IN_PROCESS_SERVICES) {
      const span = serverOf(service);
      assert.ok(span, `a SERVER span of ${service}: ${JSON.stringify(spans.map((s) => [s.name, spanAttribute(s, "webcodex.service")]))}`);
      assert.equal(ancestors(span).at(-1), "tools/call edit_project_files", `${service} is inside the call`);
    }
    assert.ok(ancestors(serverOf("runner") as OtlpSpan).includes("dispatch"));
    assert.ok(ancestors(serverOf("audit") as OtlpSpan).includes("record"));
    assert.ok(ancestors(serverOf("ref-resolver") as OtlpSpan).includes("resolution"));
  });

  it("a call carrying traceparent in params._meta continues the caller's trace, with the MCP semantic-convention attributes and never its arguments", async () => {
    const traceId = randomBytes(16).toString("hex");
    const parentId = randomBytes(8).toString("hex");
    const secret = `needle-${randomBytes(6).toString("hex")}`;
    const project = `agent:local:${projectIdFor(projectDir)}`;
    const res = await client.callTool({
      name: "search_project_texts",
      arguments: { project, queries: [{ pattern: secret }] },
      _meta: { traceparent: `00-${traceId}-${parentId}-01`, tracestate: "vendor=1" },
    });
    assert.notEqual(res.isError, true, JSON.stringify(res.structuredContent));
    const failed = await client.callTool({ name: "no_such_tool", arguments: {}, _meta: { traceparent: `00-${traceId}-${parentId}-01` } });
    assert.equal(failed.isError, true);
    await telemetry.flush();

    const spans = collector.spans().filter((s) => s.traceId === traceId);
    const call = spans.find((s) => s.name === "tools/call search_project_texts");
    assert.ok(call, `the call joined the caller's trace: ${JSON.stringify(spans.map((s) => s.name))}`);
    assert.equal(call.parentSpanId, parentId, "a child of the caller's span");
    assert.equal(spanAttribute(call, "mcp.method.name"), "tools/call");
    assert.equal(spanAttribute(call, "gen_ai.tool.name"), "search_project_texts");
    assert.equal(spanAttribute(call, "gen_ai.operation.name"), "execute_tool");
    assert.match(String(spanAttribute(call, "jsonrpc.request.id")), /^\d+$/);
    assert.equal(spanAttribute(call, "error.type"), undefined);
    assert.ok(
      spans.some((s) => s.kind === 2 && s.parentSpanId !== undefined),
      "the services' spans are in the same trace",
    );
    const refused = spans.find((s) => s.name === "tools/call no_such_tool");
    assert.ok(refused);
    assert.equal(spanAttribute(refused, "error.type"), "unknown_tool");
    assert.doesNotMatch(JSON.stringify(collector.spans()), new RegExp(secret), "no argument reaches a span");
  });

  it("the caller's trace from params._meta reaches the Job's environment as TRACEPARENT", async () => {
    const traceId = randomBytes(16).toString("hex");
    const project = `agent:local:${projectIdFor(projectDir)}`;
    const res = await client.callTool({
      name: "run_shell",
      arguments: { project, command: 'echo "tp=$TRACEPARENT"', wait_ms: 30_000 },
      _meta: { traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01` },
    });
    assert.notEqual(res.isError, true, JSON.stringify(res.structuredContent));
    const m = new RegExp(`tp=00-${traceId}-([0-9a-f]{16})-01`).exec(JSON.stringify(res.structuredContent));
    assert.ok(m, `TRACEPARENT carries the caller's trace id: ${JSON.stringify(res.structuredContent)}`);
    await telemetry.flush();
    const runner = collector.spans().find((s) => s.traceId === traceId && s.spanId === m[1]);
    assert.ok(runner, "the Job's parent is a span of the call's trace");
  });
});
