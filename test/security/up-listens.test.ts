/**
 * `webcodex up` listens on six consecutive ports. A port another process already holds (here
 * one that answers every HTTP request with 200, as another server's health check would) must
 * not pass for one of its services: `up` exits with one line naming the port and the service,
 * never prints that it is running, and leaves no service of its own behind.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import type { Server } from "node:http";
import { findFreeBasePort, SERVICES } from "@webcodex/cli";
import { cliPath, createProjectDir, tempDir } from "../support/index.js";

async function holdPort(port: number, host: string): Promise<Server> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"ready":true,"status":"ok"}');
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

function runUp(basePort: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [cliPath, "up", "--project", createProjectDir({ "a.txt": "a\n" }), "--port", String(basePort)], {
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: tempDir("wcx-up-home-"),
      WEBCODEX_POSTGRES_URL: process.env["WEBCODEX_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/test",
      WEBCODEX_REDIS_URL: process.env["WEBCODEX_TEST_REDIS_URL"] ?? "redis://127.0.0.1:6379",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  return new Promise((resolve) =>
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

/** True when nothing listens on `port` on 127.0.0.1 (the held one aside, the stack left nothing). */
function free(port: number): Promise<boolean> {
  return holdPort(port, "127.0.0.1").then(
    (s) => new Promise<boolean>((r) => s.close(() => r(true))),
    () => false,
  );
}

describe("webcodex up checks its own listens", () => {
  for (const [service, host] of [
    ["gateway", "127.0.0.1"],
    ["runner", "0.0.0.0"],
    ["tool-registry", "127.0.0.1"],
  ] as const) {
    it(`a ${service} port held by another process (on ${host}) stops it with one line naming the port and the service`, async () => {
      const basePort = await findFreeBasePort();
      const held = basePort + SERVICES.indexOf(service);
      const holder = await holdPort(held, host);
      try {
        const { code, stdout, stderr } = await runUp(basePort);
        assert.equal(code, 1, stderr);
        assert.doesNotMatch(stdout, /running|MCP URL/);
        assert.equal(
          stderr,
          `webcodex: port ${held} (for the ${service} service) is already in use on 127.0.0.1; stop what holds it or choose another --port\n`,
        );
        // Nothing of the stack was left listening on its other ports.
        for (let p = basePort; p < basePort + SERVICES.length; p++) if (p !== held) assert.equal(await free(p), true, `port ${p} left held`);
      } finally {
        await new Promise((r) => holder.close(r));
      }
    });
  }
});
