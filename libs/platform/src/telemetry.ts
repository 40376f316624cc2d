/**
 * OpenTelemetry bootstrap. Off unless OTEL_EXPORTER_OTLP_ENDPOINT (or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; a bad setting warns and falls back to off.
 * Telemetry must never break the app.
 */
import type { Logger } from "./logger.js";
import type { Env } from "./config.js";

export interface Telemetry {
  readonly enabled: boolean;
  shutdown(): Promise<void>;
}

export async function startTelemetry(serviceName: string, env: Env, logger: Logger): Promise<Telemetry> {
  const endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] ?? env["OTEL_EXPORTER_OTLP_ENDPOINT"];
  if (!endpoint || env["OTEL_SDK_DISABLED"] === "true") return { enabled: false, shutdown: async () => undefined };
  try {
    new URL(endpoint);
    const [{ NodeSDK }, { OTLPTraceExporter }] = await Promise.all([
      import("@opentelemetry/sdk-node"),
      import("@opentelemetry/exporter-trace-otlp-http"),
    ]);
    const sdk = new NodeSDK({ serviceName: env["OTEL_SERVICE_NAME"] ?? serviceName, traceExporter: new OTLPTraceExporter() });
    sdk.start();
    logger.info("telemetry enabled", { endpoint });
    return { enabled: true, shutdown: () => sdk.shutdown().catch(() => undefined) };
  } catch (error) {
    logger.warn("telemetry disabled: invalid OpenTelemetry configuration", { error });
    return { enabled: false, shutdown: async () => undefined };
  }
}
