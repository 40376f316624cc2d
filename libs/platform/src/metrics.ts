/** A small Prometheus text-format registry for each service's `/metrics`. */
export interface Counter {
  inc(labels?: Record<string, string>, value?: number): void;
}
export interface Histogram {
  observe(value: number, labels?: Record<string, string>): void;
}
export interface Metrics {
  counter(name: string, help: string): Counter;
  histogram(name: string, help: string, buckets?: number[]): Histogram;
  render(): string;
}

const labelKey = (labels: Record<string, string> | undefined) =>
  labels ? Object.keys(labels).sort().map((k) => `${k}="${String(labels[k]).replace(/["\\\n]/g, "_")}"`).join(",") : "";

export function createMetrics(): Metrics {
  const renderers: Array<() => string> = [];
  return {
    counter(name, help) {
      const values = new Map<string, number>();
      renderers.push(() => {
        let out = `# HELP ${name} ${help}\n# TYPE ${name} counter\n`;
        for (const [k, v] of values) out += `${name}${k ? `{${k}}` : ""} ${v}\n`;
        return out;
      });
      return { inc: (labels, value = 1) => { const k = labelKey(labels); values.set(k, (values.get(k) ?? 0) + value); } };
    },
    histogram(name, help, buckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]) {
      const series = new Map<string, { counts: number[]; sum: number; count: number }>();
      renderers.push(() => {
        let out = `# HELP ${name} ${help}\n# TYPE ${name} histogram\n`;
        for (const [k, s] of series) {
          const sep = k ? "," : "";
          buckets.forEach((b, i) => { out += `${name}_bucket{${k}${sep}le="${b}"} ${s.counts[i]}\n`; });
          out += `${name}_bucket{${k}${sep}le="+Inf"} ${s.count}\n${name}_sum${k ? `{${k}}` : ""} ${s.sum}\n${name}_count${k ? `{${k}}` : ""} ${s.count}\n`;
        }
        return out;
      });
      return {
        observe(value, labels) {
          const k = labelKey(labels);
          let s = series.get(k);
          if (!s) { s = { counts: buckets.map(() => 0), sum: 0, count: 0 }; series.set(k, s); }
          buckets.forEach((b, i) => { if (value <= b) s.counts[i] = (s.counts[i] ?? 0) + 1; });
          s.sum += value;
          s.count += 1;
        },
      };
    },
    render() {
      const mem = process.memoryUsage();
      let out = `# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes ${mem.rss}\n`;
      out += `# TYPE process_uptime_seconds gauge\nprocess_uptime_seconds ${process.uptime()}\n`;
      for (const r of renderers) out += r();
      return out;
    },
  };
}
