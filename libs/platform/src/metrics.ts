/**
 * A small Prometheus text-format registry for each service's `/metrics`. Every instrument
 * also records into the global OpenTelemetry meter, so the same numbers leave by OTLP when
 * telemetry is on (startTelemetry) and cost one no-op call when it is off.
 */
import { metrics as otelMetrics } from "@opentelemetry/api";
import type { Attributes, Meter, MeterProvider } from "@opentelemetry/api";

export interface Counter {
  inc(labels?: Record<string, string>, value?: number): void;
}
export interface Histogram {
  observe(value: number, labels?: Record<string, string>): void;
}
export interface Gauge {
  set(value: number, labels?: Record<string, string>): void;
}
export interface Metrics {
  /** Registering a name twice returns the same instrument. */
  counter(name: string, help: string): Counter;
  histogram(name: string, help: string, buckets?: number[]): Histogram;
  /** Throws for a name registered as a sampled gauge (a programming error: a value set on it would go nowhere). */
  gauge(name: string, help: string): Gauge;
  /**
   * A gauge whose value is read when the registry is rendered (or exported); `read` returning
   * undefined leaves it out. Registering a name twice keeps the first; a name already held by
   * another instrument throws.
   */
  sampledGauge(name: string, help: string, read: () => number | undefined): void;
  render(): string;
}

const labelKey = (labels: Record<string, string> | undefined) =>
  labels
    ? Object.keys(labels)
        .sort()
        .map((k) => `${k}="${String(labels[k]).replace(/["\\\n]/g, "_")}"`)
        .join(",")
    : "";

const DEFAULT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * An OTel instrument made on first use and remade when the global MeterProvider changes
 * (the SDK registers it after instruments may already exist). Never throws.
 */
function mirrored<T>(make: (meter: Meter) => T): () => T | undefined {
  let provider: MeterProvider | undefined;
  let instrument: T | undefined;
  return () => {
    try {
      const current = otelMetrics.getMeterProvider();
      if (current !== provider) {
        provider = current;
        instrument = make(current.getMeter("webcodex"));
      }
      return instrument;
    } catch {
      return undefined;
    }
  };
}

export function createMetrics(): Metrics {
  const renderers: Array<() => string> = [];
  const registered = new Map<string, Counter | Histogram | Gauge>();
  /** Sampled gauges have no instrument to hand out: their names are kept apart. */
  const sampled = new Set<string>();
  const once = <T extends Counter | Histogram | Gauge>(name: string, make: () => T): T => {
    if (sampled.has(name)) throw new Error(`metric ${name} is a sampled gauge: its value is read, never set`);
    const existing = registered.get(name);
    if (existing) return existing as T;
    const made = make();
    registered.set(name, made);
    return made;
  };
  return {
    counter: (name, help) =>
      once(name, () => {
        const values = new Map<string, number>();
        const otel = mirrored((m) => m.createCounter(name, { description: help }));
        renderers.push(() => {
          let out = `# HELP ${name} ${help}\n# TYPE ${name} counter\n`;
          for (const [k, v] of values) out += `${name}${k ? `{${k}}` : ""} ${v}\n`;
          return out;
        });
        return {
          inc: (labels, value = 1) => {
            const k = labelKey(labels);
            values.set(k, (values.get(k) ?? 0) + value);
            try {
              otel()?.add(value, labels as Attributes | undefined);
            } catch {
              /* telemetry never breaks the app */
            }
          },
        };
      }),
    histogram: (name, help, buckets = DEFAULT_BUCKETS) =>
      once(name, () => {
        const series = new Map<string, { counts: number[]; sum: number; count: number }>();
        const otel = mirrored((m) => m.createHistogram(name, { description: help, unit: "s", advice: { explicitBucketBoundaries: buckets } }));
        renderers.push(() => {
          let out = `# HELP ${name} ${help}\n# TYPE ${name} histogram\n`;
          for (const [k, s] of series) {
            const sep = k ? "," : "";
            buckets.forEach((b, i) => {
              out += `${name}_bucket{${k}${sep}le="${b}"} ${s.counts[i]}\n`;
            });
            out += `${name}_bucket{${k}${sep}le="+Inf"} ${s.count}\n${name}_sum${k ? `{${k}}` : ""} ${s.sum}\n${name}_count${k ? `{${k}}` : ""} ${s.count}\n`;
          }
          return out;
        });
        return {
          observe(value, labels) {
            const k = labelKey(labels);
            let s = series.get(k);
            if (!s) {
              s = { counts: buckets.map(() => 0), sum: 0, count: 0 };
              series.set(k, s);
            }
            buckets.forEach((b, i) => {
              if (value <= b) s.counts[i] = (s.counts[i] ?? 0) + 1;
            });
            s.sum += value;
            s.count += 1;
            try {
              otel()?.record(value, labels as Attributes | undefined);
            } catch {
              /* telemetry never breaks the app */
            }
          },
        };
      }),
    gauge: (name, help) =>
      once(name, () => {
        const values = new Map<string, { value: number; labels: Record<string, string> | undefined }>();
        const otel = mirrored((m) => {
          const g = m.createObservableGauge(name, { description: help });
          g.addCallback((result) => {
            for (const v of values.values()) result.observe(v.value, v.labels as Attributes | undefined);
          });
          return g;
        });
        renderers.push(() => {
          let out = `# HELP ${name} ${help}\n# TYPE ${name} gauge\n`;
          for (const [k, v] of values) out += `${name}${k ? `{${k}}` : ""} ${v.value}\n`;
          return out;
        });
        return {
          set(value, labels) {
            values.set(labelKey(labels), { value, labels });
            otel();
          },
        };
      }),
    sampledGauge: (name, help, read) => {
      if (registered.has(name)) throw new Error(`metric ${name} is already registered as an instrument that is set, not sampled`);
      if (sampled.has(name)) return;
      sampled.add(name);
      const value = () => {
        try {
          return read();
        } catch {
          return undefined;
        }
      };
      const otel = mirrored((m) => {
        const g = m.createObservableGauge(name, { description: help });
        g.addCallback((result) => {
          const v = value();
          if (v !== undefined) result.observe(v);
        });
        return g;
      });
      otel();
      renderers.push(() => {
        otel();
        const v = value();
        return v === undefined ? "" : `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name} ${v}\n`;
      });
    },
    render() {
      const mem = process.memoryUsage();
      let out = `# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes ${mem.rss}\n`;
      // The main thread's V8 heap and the memory outside it (Buffers, ArrayBuffers): with the
      // resident size, they tell a JavaScript leak from native or WebAssembly growth.
      out += `# TYPE nodejs_heap_used_bytes gauge\nnodejs_heap_used_bytes ${mem.heapUsed}\n`;
      out += `# TYPE nodejs_heap_total_bytes gauge\nnodejs_heap_total_bytes ${mem.heapTotal}\n`;
      out += `# TYPE nodejs_external_memory_bytes gauge\nnodejs_external_memory_bytes ${mem.external}\n`;
      out += `# TYPE nodejs_array_buffers_bytes gauge\nnodejs_array_buffers_bytes ${mem.arrayBuffers}\n`;
      out += `# TYPE process_uptime_seconds gauge\nprocess_uptime_seconds ${process.uptime()}\n`;
      for (const r of renderers) out += r();
      return out;
    },
  };
}

// ── The platform's standard instruments (one name per fact) ────────────────────────────

export interface WorkMetrics {
  /** Current Job count per state (running, pending, completed, failed, lost…). */
  setJobs(counts: Readonly<Record<string, number>>): void;
  /** Current lease count per state (held, expired…). */
  setLeases(counts: Readonly<Record<string, number>>): void;
  /** One lease operation (acquire, renew, release, fence_rejected) and how it ended. */
  leaseOperation(op: string, result: "ok" | "rejected" | "error"): void;
}

/** Job and lease metrics for the runner-broker and Runners. */
export function createWorkMetrics(metrics: Metrics): WorkMetrics {
  const jobs = metrics.gauge("webcodex_jobs", "Jobs by state");
  const leases = metrics.gauge("webcodex_leases", "Leases by state");
  const leaseOps = metrics.counter("webcodex_lease_operations_total", "Lease operations by operation and result");
  return {
    setJobs: (counts) => {
      for (const [state, n] of Object.entries(counts)) jobs.set(n, { state });
    },
    setLeases: (counts) => {
      for (const [state, n] of Object.entries(counts)) leases.set(n, { state });
    },
    leaseOperation: (op, result) => leaseOps.inc({ op, result }),
  };
}
