/**
 * tools/scripts/ensure-services.sh (what `make test` runs before the integration suites)
 * chooses like test/support/backing-services.ts: a Docker engine that answers means the tests
 * start their own containers and the local servers are not needed; WEBCODEX_TEST_POSTGRES_URL
 * set means the configured servers, Docker or not. The engine here is a fake one on a unix
 * socket answering the Docker API calls testcontainers makes to detect a runtime.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import http from "node:http";
import net from "node:net";
import { join } from "node:path";
import { backingServices, repoRoot, tempDir } from "../support/index.js";

const script = join(repoRoot, "tools/scripts/ensure-services.sh");

function runScript(env: Record<string, string>): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      "bash",
      [script],
      { env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: tempDir("wcx-ensure-home-"), ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout: `${stdout}${stderr}` });
      },
    );
  });
}

/** A port nothing listens on. */
async function deadPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

describe("ensure-services.sh", () => {
  let engine: http.Server;
  let dockerHost: string;
  const requests: string[] = [];

  before(async () => {
    const socket = join(tempDir("wcx-docker-"), "docker.sock");
    engine = http.createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      const body = req.url?.startsWith("/networks/")
        ? { IPAM: { Config: [{ Gateway: "127.0.0.1" }] } }
        : { ServerVersion: "99.0-fake", OperatingSystem: "Fake", OSType: "linux", Architecture: "x86_64", NCPU: 2, MemTotal: 1 };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
    await new Promise<void>((r) => engine.listen(socket, () => r()));
    dockerHost = `unix://${socket}`;
  });
  after(async () => {
    await new Promise<void>((r) => engine.close(() => r()));
  });

  it("with a Docker engine answering at DOCKER_HOST, it leaves the servers to testcontainers and requires no local ones", async () => {
    requests.length = 0;
    const dead = await deadPort();
    const { code, stdout } = await runScript({ DOCKER_HOST: dockerHost, WEBCODEX_TEST_REDIS_URL: `redis://127.0.0.1:${dead}` });
    assert.equal(code, 0, stdout);
    assert.match(stdout, /Docker 99\.0-fake .*answers; the tests start Postgres and Redis with testcontainers/);
    assert.doesNotMatch(stdout, /Redis at|are up/, "the local servers were not checked");
    assert.ok(requests.includes("GET /info"), `the engine was asked: ${requests.join(", ")}`);
  });

  it("with WEBCODEX_TEST_POSTGRES_URL set, Docker is not used: the configured servers are checked", async () => {
    requests.length = 0;
    const services = await backingServices();
    const { code, stdout } = await runScript({
      DOCKER_HOST: dockerHost,
      WEBCODEX_TEST_POSTGRES_URL: services.postgresAdminUrl,
      WEBCODEX_TEST_REDIS_URL: services.redisUrl,
    });
    assert.equal(code, 0, stdout);
    assert.match(stdout, /Postgres and Redis are up/);
    assert.doesNotMatch(stdout, /testcontainers/);
    assert.deepEqual(requests, [], "the engine was not asked");
  });
});
