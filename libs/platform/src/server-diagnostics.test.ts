import { describe, it } from "node:test";
import type http from "node:http";
import assert from "node:assert/strict";
import { createLogger } from "./logger.js";
import { createMetrics } from "./metrics.js";
import { sendJson, serverRuntimeOptions, startServiceServer } from "./server.js";
import type { ServiceServerOptions } from "./server.js";

const logger = createLogger({ service: "test", level: "silent" });
const start = (o: Partial<ServiceServerOptions> = {}) => startServiceServer({ name: "svc", port: 0, logger, ...o });
const failingStore = async () => ({ ready: false, checks: { postgres: { ok: false, detail: "connection refused" } } });

async function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("startServiceServer: process-local readiness, diagnostics port, drain", () => {
  it("readinessScope process: /readyz stays ready while a dependency fails; /dependencies reports it", async () => {
    const server = await start({ readinessScope: "process", readiness: failingStore });
    try {
      assert.deepEqual(await getJson(`${server.url}/readyz`), { status: 200, body: { ready: true, checks: { process: { ok: true } } } });
      const deps = await getJson(`${server.url}/dependencies`);
      assert.equal(deps.status, 503);
      assert.deepEqual(deps.body.checks, { postgres: { ok: false, detail: "connection refused" } });
    } finally {
      await server.close();
    }
  });

  it("control: the default scope follows the dependencies, and /dependencies is not served", async () => {
    const server = await start({ readiness: failingStore });
    try {
      assert.equal((await getJson(`${server.url}/readyz`)).status, 503);
      assert.equal((await fetch(`${server.url}/dependencies`)).status, 404);
    } finally {
      await server.close();
    }
  });

  it("metricsPort: /metrics and /dependencies move to that port; the service port answers neither", async () => {
    const metrics = createMetrics();
    metrics.counter("probe_total", "a probe counter").inc();
    const server = await start({ readinessScope: "process", readiness: failingStore, metrics, metricsPort: 0 });
    try {
      assert.ok(server.metricsUrl && server.metricsUrl !== server.url);
      const scraped = await fetch(`${server.metricsUrl}/metrics`);
      assert.equal(scraped.status, 200);
      assert.match(await scraped.text(), /probe_total 1/);
      assert.equal((await getJson(`${server.metricsUrl}/dependencies`)).status, 503);
      assert.equal((await fetch(`${server.url}/metrics`)).status, 404, "not on the service port an Ingress exposes");
      assert.equal((await fetch(`${server.url}/dependencies`)).status, 404);
      assert.equal((await getJson(`${server.url}/readyz`)).status, 200);
    } finally {
      await server.close();
    }
  });

  it("drainMs: close() lets a call in flight finish within the drain, past the default 2 s cut", async () => {
    let release = () => undefined as void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let entered = () => undefined as void;
    const inside = new Promise<void>((r) => {
      entered = r;
    });
    const server = await start({
      readinessScope: "process",
      drainMs: 10_000,
      httpRoutes: {
        "/slow": async (_req, res) => {
          entered();
          await gate;
          sendJson(res, 200, { done: true });
        },
      },
    });
    const call = fetch(`${server.url}/slow`).then(async (r) => ({ status: r.status, body: await r.json() }));
    await inside;
    const closed = server.close();
    // A window in which the connection must NOT be cut: past the old fixed 2 s cut, the call is
    // still held and then finishes with its answer.
    // eslint-disable-next-line no-restricted-syntax -- a fixed window for something that must not happen
    await new Promise((r) => setTimeout(r, 2_500));
    release();
    assert.deepEqual(await call, { status: 200, body: { done: true } });
    await closed;
  });

  it("control: with a short drain the held call's connection is cut", async () => {
    let entered = () => undefined as void;
    const inside = new Promise<void>((r) => {
      entered = r;
    });
    const server = await start({
      drainMs: 100,
      httpRoutes: {
        "/slow": () => {
          entered();
          return new Promise<void>(() => undefined);
        },
      },
    });
    const call = fetch(`${server.url}/slow`).then(
      () => "answered",
      () => "cut",
    );
    await inside;
    await server.close();
    assert.equal(await call, "cut");
  });

  it("serverRuntimeOptions maps the service settings", () => {
    assert.deepEqual(serverRuntimeOptions({ readiness: "process", metricsPort: 9090, shutdownDrainMs: 5000 }), {
      readinessScope: "process",
      metricsPort: 9090,
      drainMs: 5000,
    });
    assert.deepEqual(serverRuntimeOptions({ readiness: "dependencies", shutdownDrainMs: 2000 }), { readinessScope: "dependencies", drainMs: 2000 });
  });
});

describe("startServiceServer: drain and standing event streams", () => {
  it("close() ends a GET event stream (Accept: text/event-stream) at once but waits for a call in flight", async () => {
    let entered = () => undefined as void;
    const inside = new Promise<void>((r) => {
      entered = r;
    });
    let release = () => undefined as void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const server = await start({
      drainMs: 10_000,
      httpRoutes: {
        "/events": (_req, res) => {
          const r = res as http.ServerResponse;
          r.writeHead(200, { "content-type": "text/event-stream" });
          r.write(": open\n\n");
        },
        "/slow": async (_req, res) => {
          entered();
          await gate;
          sendJson(res, 200, { done: true });
        },
      },
    });
    const events = await fetch(`${server.url}/events`, { headers: { accept: "text/event-stream" } });
    const streamEnded = events.text().then(
      () => Date.now(),
      (e: unknown) => assert.fail(`event stream: ${String(e)}`),
    );
    const call = fetch(`${server.url}/slow`).then(
      (r) => r.status,
      (e: unknown) => assert.fail(`call: ${String((e as Error).cause ?? e)}`),
    );
    await inside;
    const t0 = Date.now();
    const closed = server.close();
    const endedAt = await streamEnded;
    assert.ok(endedAt - t0 < 1_000, `the event stream ended ${endedAt - t0} ms into the drain`);
    release();
    assert.equal(await call, 200, "the call in flight still got its answer");
    await closed;
  });
});
