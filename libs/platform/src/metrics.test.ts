import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createMetrics } from "./metrics.js";

describe("metrics registry", () => {
  it("reports the process's resident size, V8 heap and memory outside the heap", () => {
    const text = createMetrics().render();
    for (const name of [
      "process_resident_memory_bytes",
      "nodejs_heap_used_bytes",
      "nodejs_heap_total_bytes",
      "nodejs_external_memory_bytes",
      "nodejs_array_buffers_bytes",
    ])
      assert.match(text, new RegExp(`^${name} \\d+$`, "m"), name);
  });

  it("reads a sampled gauge each time it renders, leaves it out while it has no value, and survives a failing read", () => {
    const metrics = createMetrics();
    let value: number | undefined = 5;
    metrics.sampledGauge("test_sampled_bytes", "A sampled value", () => value);
    metrics.sampledGauge("test_failing_bytes", "A read that throws", () => {
      throw new Error("gone");
    });
    assert.match(metrics.render(), /^test_sampled_bytes 5$/m);
    value = 7;
    assert.match(metrics.render(), /^test_sampled_bytes 7$/m);
    value = undefined;
    assert.doesNotMatch(metrics.render(), /test_sampled_bytes/);
    assert.doesNotMatch(metrics.render(), /test_failing_bytes/);
    // Registering a name twice keeps the first.
    metrics.sampledGauge("test_sampled_bytes", "again", () => 9);
    value = 1;
    assert.match(metrics.render(), /^test_sampled_bytes 1$/m);
  });

  it("refuses to hand out a set gauge under a sampled gauge's name, and the other way round", () => {
    const metrics = createMetrics();
    metrics.sampledGauge("test_sampled_bytes", "A sampled value", () => 5);
    assert.throws(() => metrics.gauge("test_sampled_bytes", "set"), /test_sampled_bytes is a sampled gauge/);
    assert.throws(() => metrics.counter("test_sampled_bytes", "counted"), /test_sampled_bytes is a sampled gauge/);
    assert.match(metrics.render(), /^test_sampled_bytes 5$/m);
    metrics.gauge("test_set_bytes", "set").set(3);
    assert.throws(() => metrics.sampledGauge("test_set_bytes", "sampled", () => 4), /test_set_bytes is already registered/);
    assert.match(metrics.render(), /^test_set_bytes 3$/m);
  });
});
