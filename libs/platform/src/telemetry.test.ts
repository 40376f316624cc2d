import { describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { trace } from "@opentelemetry/api";
import { createLogger } from "./logger.js";
import { startTelemetry } from "./telemetry.js";

function capturingLogger(): { logger: ReturnType<typeof createLogger>; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { logger: createLogger({ service: "test", level: "debug", write: (l) => lines.push(JSON.parse(l) as Record<string, unknown>) }), lines };
}

/** No SDK registered: spans from the global API record nothing and nothing is exported. */
function spansRecorded(): boolean {
  const span = trace.getTracer("telemetry-test").startSpan("probe");
  const recording = span.isRecording();
  span.end();
  return recording;
}

// The tests run in order: the SDK, once started, is global to this process.
describe("startTelemetry", () => {
  it("is off without an OTLP endpoint: no SDK, no exporter, nothing logged", async () => {
    const { logger, lines } = capturingLogger();
    const telemetry = await startTelemetry("svc", { OTEL_SERVICE_NAME: "x", OTEL_TRACES_SAMPLER: "always_on" }, logger);
    assert.equal(telemetry.enabled, false);
    assert.equal(spansRecorded(), false);
    await telemetry.flush();
    await telemetry.shutdown();
    assert.deepEqual(lines, []);
  });

  it("is off when OTEL_SDK_DISABLED=true, even with an endpoint", async () => {
    const { logger } = capturingLogger();
    const telemetry = await startTelemetry("svc", { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_SDK_DISABLED: "true" }, logger);
    assert.equal(telemetry.enabled, false);
    assert.equal(spansRecorded(), false);
  });

  it("an endpoint that is not a URL warns and falls back to off instead of throwing", async () => {
    const { logger, lines } = capturingLogger();
    const telemetry = await startTelemetry("svc", { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "not a url" }, logger);
    assert.equal(telemetry.enabled, false);
    assert.equal(spansRecorded(), false);
    assert.deepEqual(
      lines.map((l) => [l["level"], l["msg"]]),
      [["warn", "telemetry disabled: invalid OpenTelemetry configuration"]],
    );
  });

  it("bad OTEL_* values beside a good endpoint warn and fall back to defaults; spans still go out by OTLP/HTTP", async () => {
    const received: string[] = [];
    const collector = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        received.push(`${req.method} ${req.url} ${req.headers["content-type"]}`);
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => collector.listen(0, "127.0.0.1", () => r()));
    const settings: Record<string, string> = {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: "carrier-pigeon",
      OTEL_TRACES_SAMPLER: "bogus",
    };
    // The SDK reads OTEL_* from process.env itself.
    const saved = Object.fromEntries(Object.keys(settings).map((k) => [k, process.env[k]]));
    Object.assign(process.env, settings);
    const { logger, lines } = capturingLogger();
    try {
      const telemetry = await startTelemetry("svc", process.env, logger);
      assert.equal(telemetry.enabled, true);
      assert.equal(spansRecorded(), true);
      await telemetry.flush();
      await telemetry.shutdown();
      assert.ok(received.includes("POST /v1/traces application/x-protobuf"), received.join(", "));
      const warnings = lines.filter((l) => l["level"] === "warn").map((l) => String(l["message"]));
      assert.ok(
        warnings.some((w) => /traces protocol: carrier-pigeon/.test(w)),
        warnings.join(" | "),
      );
      assert.ok(
        warnings.some((w) => /OTEL_TRACES_SAMPLER value "bogus"/.test(w)),
        warnings.join(" | "),
      );
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      await new Promise<void>((r) => collector.close(() => r()));
    }
  });
});
