/**
 * The bounded call facts ActionAudit stores instead of arguments and results: the hashed
 * argument shape (never a value), result sizes with the metadata share of the projection;
 * and the metric registry they feed.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { toolDefinition } from "@webcodex/contracts";
import { argumentShape, createMetrics, createWorkMetrics, measureResult } from "@webcodex/platform";
import { createCallMetrics } from "@webcodex/gateway";
import type { ArgumentShapeSketch, ShapeSchema } from "@webcodex/platform";

const schemaOf = (tool: string) => toolDefinition(tool)?.inputSchema as ShapeSchema | undefined;
const shape = (args: unknown, tool = "run_shell") => argumentShape(args, schemaOf(tool)) as ArgumentShapeSketch;
const diff = (a: ArgumentShapeSketch, b: ArgumentShapeSketch) => ({
  removed: a.leaves.filter((l) => !b.leaves.includes(l)).length,
  added: b.leaves.filter((l) => !a.leaves.includes(l)).length,
});

describe("argumentShape", () => {
  it("depends on key paths and JSON types only: different values, same fingerprint", () => {
    const a = shape({ project: "~p1", command: "npm test -- --grep 'secret sauce'", cwd: "packages/a", timeout_ms: 5000 });
    const b = shape({ project: "agent:acme:other", command: "rm -rf /", cwd: "x", timeout_ms: 1 });
    assert.equal(a.fingerprint, b.fingerprint);
    assert.deepEqual(a.leaves, b.leaves);
    assert.match(a.fingerprint, /^[0-9a-f]{16}$/);
    for (const leaf of a.leaves) assert.match(leaf, /^[0-9a-f]{12}$/);
    assert.doesNotMatch(JSON.stringify(a), /npm|secret|packages|5000|p1/);
  });

  it("one mechanical correction changes at most one leaf each way", () => {
    const base = { project: "~p1", command: "make", cwd: "src" };
    assert.deepEqual(diff(shape({ ...base, workdir: "src", cwd: undefined }), shape(base)), { removed: 1, added: 1 }, "renamed field");
    assert.deepEqual(diff(shape({ ...base, timeout_ms: "5000" }), shape({ ...base, timeout_ms: 5000 })), { removed: 1, added: 1 }, "retyped value");
    assert.deepEqual(diff(shape({ ...base, verbose: true }), shape(base)), { removed: 1, added: 0 }, "dropped unknown field");
    assert.deepEqual(diff(shape(base), shape({ ...base, timeout_ms: 10 })), { removed: 0, added: 1 }, "added field");
  });

  it("array lengths and free-form map keys are data, not shape", () => {
    const one = shape({ project: "~p1", files: [{ path: "a.ts" }] }, "read_files");
    const three = shape({ project: "~p1", files: [{ path: "a.ts" }, { path: "b.ts" }, { path: "c.ts" }] }, "read_files");
    assert.equal(one.fingerprint, three.fingerprint);
    const envA = shape({ project: "~p1", command: "x", env: { AWS_SECRET_ACCESS_KEY: "k" } });
    const envB = shape({ project: "~p1", command: "x", env: { NODE_ENV: "test" } });
    assert.equal(envA.fingerprint, envB.fingerprint, "env keys collapse to *");
  });

  it("is undefined for a non-object and bounded for a huge one", () => {
    assert.equal(argumentShape("rm -rf /"), undefined);
    assert.equal(argumentShape(null), undefined);
    const huge = {
      project: "~p1",
      command: "x",
      nested: Array.from({ length: 100 }, (_, i) => Object.fromEntries(Array.from({ length: i + 1 }, (_, k) => [`k${k}`, k]))),
    };
    assert.ok(shape(huge).leaves.length <= 64);
    const wide = {
      project: "~p1",
      command: "x",
      env: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`K${i}`, i % 2 === 0 ? "s" : [1, "2", true, null, { a: 1 }][i % 5]])),
    };
    assert.ok(shape(wide).leaves.length <= 64);
  });

  it("undeclared keys collapse to a count: their names never reach the shape", () => {
    const base = { project: "~p1", command: "make" };
    const guessable = shape({ ...base, password: "x" });
    const other = shape({ ...base, workdir: 3 });
    assert.equal(guessable.fingerprint, other.fingerprint, "which undeclared key was sent is not recorded");
    assert.notEqual(shape({ ...base, a: 1, b: 2 }).fingerprint, guessable.fingerprint, "how many were sent is");
    assert.notEqual(guessable.fingerprint, shape(base).fingerprint);
    const unknownTool = argumentShape({ api_key_for_prod: 1, nested: { token_name: 2 } });
    assert.deepEqual(unknownTool, argumentShape({ x: "y", z: [] }), "without a schema every key is undeclared");
  });
});

describe("measureResult", () => {
  it("counts repeated and echoed members of the projection as metadata, content as payload", () => {
    const args = { project: "~p1", path: "src" };
    const items = Array.from({ length: 12 }, (_, i) => ({ path: `src/f${i}.ts`, kind: "file", binary: false, truncated: false, success: true, error: null }));
    const projected = { project: "~p1", items };
    const sizes = measureResult({ ...projected, execution_state: "completed" }, projected, args);
    assert.ok(sizes);
    assert.equal(sizes.projectedBytes, Buffer.byteLength(JSON.stringify(projected)));
    assert.ok(sizes.canonicalBytes > sizes.projectedBytes);
    assert.ok(sizes.projectedMetadataBytes / sizes.projectedBytes >= 0.5, `metadata share ${sizes.projectedMetadataBytes}/${sizes.projectedBytes}`);

    const content = { items: [{ path: "README.md", content: "x".repeat(4000), read_revision: "r1" }] };
    const lean = measureResult(content, content, { project: "~p1" });
    assert.ok(lean && lean.projectedMetadataBytes / lean.projectedBytes < 0.05);
  });

  it("never throws: an unserializable value gives undefined", () => {
    assert.equal(measureResult({ n: 1n }, {}), undefined);
  });
});

describe("metrics registry", () => {
  it("renders call, failure, stage, job and lease metrics; registering a name twice returns the same instrument", () => {
    const metrics = createMetrics();
    const calls = createCallMetrics(metrics);
    createCallMetrics(metrics).observeCall({ tool: "read_files", outcome: "success", durationSeconds: 0.004, stagesUs: { normalization: 20, dispatch: 3000 } });
    calls.observeCall({ tool: "run_shell", outcome: "failure", reasonCode: "execution_failed", durationSeconds: 0.2, stagesUs: { dispatch: 190_000 } });
    const work = createWorkMetrics(metrics);
    work.setJobs({ running: 2, completed: 5 });
    work.setJobs({ running: 1 });
    work.setLeases({ held: 3 });
    work.leaseOperation("acquire", "ok");
    const text = metrics.render();
    assert.match(text, /webcodex_tool_calls_total\{outcome="success",tool="read_files"\} 1/);
    assert.match(text, /webcodex_tool_call_failures_total\{reason_code="execution_failed",tool="run_shell"\} 1/);
    assert.match(text, /webcodex_tool_call_stage_seconds_count\{stage="dispatch"\} 2/);
    assert.match(text, /# TYPE webcodex_jobs gauge\nwebcodex_jobs\{state="running"\} 1\nwebcodex_jobs\{state="completed"\} 5/);
    assert.match(text, /webcodex_leases\{state="held"\} 3/);
    assert.match(text, /webcodex_lease_operations_total\{op="acquire",result="ok"\} 1/);
    assert.equal(text.match(/# TYPE webcodex_tool_calls_total/g)?.length, 1, "one family per name");
  });
});
