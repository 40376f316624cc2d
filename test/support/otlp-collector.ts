/** A minimal OTLP/HTTP JSON receiver (traces and metric names) for telemetry tests. */
import http from "node:http";

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: Array<{ key: string; value: { stringValue?: string; intValue?: string | number } }>;
  /** The exporting process's `service.name` resource attribute. */
  service: string;
}

export interface OtlpCollector {
  url: string;
  spans(): OtlpSpan[];
  metricNames(): Set<string>;
  close(): Promise<void>;
}

/** Starts the receiver on 127.0.0.1 (a free port); point OTEL_EXPORTER_OTLP_ENDPOINT at `url` with protocol http/json. */
export async function startOtlpCollector(): Promise<OtlpCollector> {
  const spans: OtlpSpan[] = [];
  const metricNames = new Set<string>();
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => {
      body += d.toString();
    });
    req.on("end", () => {
      try {
        const json = JSON.parse(body) as Record<string, unknown>;
        if (req.url === "/v1/traces") {
          for (const rs of (json["resourceSpans"] as Array<Record<string, unknown>>) ?? []) {
            const attrs = ((rs["resource"] as Record<string, unknown>)?.["attributes"] as OtlpSpan["attributes"]) ?? [];
            const service = attrs.find((a) => a.key === "service.name")?.value.stringValue ?? "";
            for (const ss of (rs["scopeSpans"] as Array<{ spans: OtlpSpan[] }>) ?? []) for (const s of ss.spans ?? []) spans.push({ ...s, service });
          }
        } else if (req.url === "/v1/metrics") {
          for (const rm of (json["resourceMetrics"] as Array<{ scopeMetrics?: Array<{ metrics?: Array<{ name: string }> }> }>) ?? []) {
            for (const sm of rm.scopeMetrics ?? []) for (const m of sm.metrics ?? []) metricNames.add(m.name);
          }
        }
      } catch {
        // not JSON: ignored
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => [...spans],
    metricNames: () => new Set(metricNames),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A span attribute as a string (string or int values). */
export function spanAttribute(span: OtlpSpan, key: string): string | undefined {
  const v = span.attributes?.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue !== undefined ? String(v.intValue) : undefined);
}
