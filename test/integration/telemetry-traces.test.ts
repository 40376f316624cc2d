/**
 * One trace per tool call across services. A test collector (an OTLP/HTTP JSON receiver on
 * 127.0.0.1) receives the spans of one call that goes: a gateway root span → an in-process
 * hop (embedded mode's runServerSpan) → a relay service over real HTTP/2 → the real audit
 * service implementation in another process (its own SDK, its own resource) → Postgres.
 * The Connect interceptors carry the context; metrics leave by OTLP as well; and telemetry
 * that fails never breaks a call.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import { connectNodeAdapter, createConnectTransport } from "@connectrpc/connect-node";
import { AuditService } from "@webcodex/proto";
import {
  createLogger,
  createMetrics,
  createPostgresDatabase,
  createTracingClientInterceptor,
  createTracingServerInterceptor,
  runServerSpan,
  startTelemetry,
  withSpan,
} from "@webcodex/platform";
import type { Database, Metrics, Telemetry } from "@webcodex/platform";
import { createCallMetrics } from "@webcodex/gateway";
import { createTestDatabase, repoRoot, spanAttribute, startOtlpCollector } from "../support/index.js";
import type { OtlpCollector, OtlpSpan, TestDatabase } from "../support/index.js";

/** The real audit service implementation in its own process, behind the tracing server interceptor. */
const auditProcessScript = `
import http2 from "node:http2";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { AuditService } from "@webcodex/proto";
import { createAudit, migrateAudit } from "@webcodex/audit";
import { createLogger, createMetrics, createPostgresDatabase, createTracingServerInterceptor, startTelemetry } from "@webcodex/platform";
const logger = createLogger({ service: "audit", level: "warn" });
const telemetry = await startTelemetry("webcodex-audit", process.env, logger);
const db = createPostgresDatabase({ url: process.env.WEBCODEX_POSTGRES_URL });
await migrateAudit(db);
const handler = connectNodeAdapter({ routes: (r) => r.service(AuditService, createAudit({ db })), interceptors: [createTracingServerInterceptor({ service: "audit", metrics: createMetrics() })] });
const server = http2.createServer(handler);
server.listen(0, "127.0.0.1", () => process.stdout.write("PORT " + server.address().port + "\\n"));
process.on("SIGTERM", async () => { await telemetry.shutdown(); await db.close(); process.exit(0); });
`;

describe("tracing across services", () => {
  let collector: OtlpCollector;
  let telemetry: Telemetry;
  let database: TestDatabase;
  let db: Database;
  let child: ChildProcess;
  let relayServer: http2.Http2Server;
  const relaySessions = new Set<http2.ServerHttp2Session>();
  let relayClient: Client<typeof AuditService>;
  let metrics: Metrics;

  before(async () => {
    collector = await startOtlpCollector();
    database = await createTestDatabase();
    db = createPostgresDatabase({ url: database.url, max: 2 });
    const otelEnv = {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_BSP_SCHEDULE_DELAY: "50",
      OTEL_METRIC_EXPORT_INTERVAL: "500",
      OTEL_NODE_RESOURCE_DETECTORS: "none",
      // A dead collector (last test) must not hold shutdown for the default 10 s.
      OTEL_EXPORTER_OTLP_TIMEOUT: "500",
    };
    child = spawn(process.execPath, ["--input-type=module", "-e", auditProcessScript], {
      cwd: repoRoot,
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", WEBCODEX_POSTGRES_URL: database.url, ...otelEnv },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const auditPort = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`audit process did not start: ${stderr}`)), 30_000);
      child.stdout?.on("data", (d: Buffer) => {
        const m = /PORT (\d+)/.exec(d.toString());
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`audit process exited ${code}: ${stderr}`));
      });
    });

    // This process plays the gateway and a relay service; the SDK reads process.env.
    Object.assign(process.env, otelEnv);
    telemetry = await startTelemetry("webcodex-gateway", process.env, createLogger({ service: "test", level: "silent" }));
    assert.equal(telemetry.enabled, true);
    metrics = createMetrics();

    const toAudit = createClient(
      AuditService,
      createConnectTransport({ baseUrl: `http://127.0.0.1:${auditPort}`, httpVersion: "2", interceptors: [createTracingClientInterceptor({ metrics })] }),
    );
    const relay = connectNodeAdapter({
      routes: (r) =>
        r.service(AuditService, {
          recordActions: (req) => toAudit.recordActions(req),
          listActions: (req, ctx) => toAudit.listActions(req, { headers: ctx.requestHeader }),
        }),
      interceptors: [createTracingServerInterceptor({ service: "relay", metrics })],
    });
    relayServer = http2.createServer(relay);
    relayServer.on("session", (session) => {
      relaySessions.add(session);
      session.once("close", () => relaySessions.delete(session));
    });
    await new Promise<void>((resolve) => relayServer.listen(0, "127.0.0.1", resolve));
    const relayPort = (relayServer.address() as { port: number }).port;
    relayClient = createClient(
      AuditService,
      createConnectTransport({ baseUrl: `http://127.0.0.1:${relayPort}`, httpVersion: "2", interceptors: [createTracingClientInterceptor()] }),
    );
  });

  after(async () => {
    await telemetry?.shutdown();
    for (const session of relaySessions) session.destroy();
    relayServer?.close();
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    }
    await collector?.close();
    await db?.close();
    await database?.drop();
  });

  /** One "tool call": a root span, an in-process hop, then relay → audit process → Postgres. */
  async function toolCall(callId: string): Promise<void> {
    await withSpan("tools/call edit_project_files", { "webcodex.tool": "edit_project_files" }, async () => {
      await runServerSpan("webcodex.toolregistry.v1.ToolRegistryService", "GetAdmittedCatalog", undefined, async () => undefined, { service: "tool-registry" });
      await relayClient.recordActions({
        records: [
          {
            callId,
            clientId: "acme",
            subject: "alice",
            tool: "edit_project_files",
            effect: "workspace_write",
            outcome: "success",
            startedAtUnixMs: BigInt(Date.now()),
            durationUs: 10,
          },
        ],
      });
    });
  }

  it("a test collector receives one trace whose spans cover every service of the call, correctly parented", async () => {
    const callId = randomUUID();
    await toolCall(callId);
    await telemetry.flush();
    // The audit process exports on its own batch schedule (50 ms).
    let trace: OtlpSpan[] = [];
    const deadline = Date.now() + 10_000;
    for (;;) {
      const root = collector.spans().find((s) => s.name === "tools/call edit_project_files");
      trace = root ? collector.spans().filter((s) => s.traceId === root.traceId) : [];
      if (trace.some((s) => s.service === "webcodex-audit") || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const root = trace.find((s) => s.name === "tools/call edit_project_files");
    assert.ok(root, "root span exported");
    assert.equal(root.parentSpanId ?? "", "", "the tool call is the root");
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    const parentOf = (s: OtlpSpan) => (s.parentSpanId ? byId.get(s.parentSpanId) : undefined);

    const registry = trace.find((s) => spanAttribute(s, "webcodex.service") === "tool-registry");
    assert.equal(registry && parentOf(registry)?.spanId, root.spanId, "in-process hop is a child of the call");

    const servers = trace.filter((s) => s.kind === 2 && spanAttribute(s, "rpc.service") === "webcodex.audit.v1.AuditService");
    const relay = servers.find((s) => spanAttribute(s, "webcodex.service") === "relay");
    const audit = servers.find((s) => spanAttribute(s, "webcodex.service") === "audit");
    assert.ok(relay && audit, `relay and audit server spans: ${JSON.stringify(trace.map((s) => [s.name, s.kind, s.service]))}`);
    assert.equal(audit.service, "webcodex-audit", "exported by the audit process itself");
    assert.equal(relay.service, "webcodex-gateway");
    // root → CLIENT → relay SERVER → CLIENT → audit SERVER: context crossed two real HTTP/2 hops.
    const relayClientSpan = parentOf(relay);
    assert.equal(relayClientSpan?.kind, 3);
    assert.equal(parentOf(relayClientSpan as OtlpSpan)?.spanId, root.spanId);
    const auditClientSpan = parentOf(audit);
    assert.equal(auditClientSpan?.kind, 3);
    assert.equal(parentOf(auditClientSpan as OtlpSpan)?.spanId, relay.spanId);
    assert.equal(spanAttribute(audit, "rpc.method"), "RecordActions");
    assert.deepEqual(new Set(trace.map((s) => spanAttribute(s, "webcodex.service")).filter(Boolean)), new Set(["tool-registry", "relay", "audit"]));
    // Nothing of the call leaked into another trace.
    assert.equal(collector.spans().filter((s) => s.service === "webcodex-audit" && s.traceId !== root.traceId).length, 0);

    const stored = await db.query(`SELECT 1 FROM audit.action_audit WHERE call_id = $1`, [callId]);
    assert.equal(stored.rowCount, 1, "the call really reached Postgres through both hops");
  });

  it("metrics leave by OTLP and on /metrics (Prometheus text) from the same instruments", async () => {
    const calls = createCallMetrics(metrics);
    calls.observeCall({
      tool: "run_shell",
      outcome: "failure",
      reasonCode: "execution_failed",
      durationSeconds: 0.02,
      stagesUs: { normalization: 30, dispatch: 15_000 },
    });
    await telemetry.flush();
    const names = collector.metricNames();
    for (const name of [
      "webcodex_tool_calls_total",
      "webcodex_tool_call_failures_total",
      "webcodex_tool_call_stage_seconds",
      "webcodex_rpc_server_requests_total",
    ]) {
      assert.ok(names.has(name), `${name} exported by OTLP (got ${[...names].join(", ")})`);
    }
    const text = metrics.render();
    assert.match(text, /webcodex_tool_call_failures_total\{reason_code="execution_failed",tool="run_shell"\} 1/);
    assert.match(text, /webcodex_tool_call_stage_seconds_count\{stage="dispatch"\} 1/);
    assert.match(text, /webcodex_rpc_server_requests_total\{code="ok",method="RecordActions",service="webcodex.audit.v1.AuditService"\} \d+/);
  });

  it("telemetry never breaks the app: a bad setting falls back to off, a dead collector fails no call", async () => {
    const warnings: string[] = [];
    const logger = createLogger({ service: "test", level: "warn", write: (line) => warnings.push(line) });
    const bad = await startTelemetry("x", { OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" }, logger);
    assert.equal(bad.enabled, false);
    assert.match(warnings.join("\n"), /telemetry disabled/);
    await bad.shutdown();

    await collector.close();
    const callId = randomUUID();
    await toolCall(callId);
    await telemetry.flush();
    const stored = await db.query(`SELECT 1 FROM audit.action_audit WHERE call_id = $1`, [callId]);
    assert.equal(stored.rowCount, 1);
  });
});
