/**
 * The six service images, run as the chart runs them (uid 10001, read-only root filesystem, all
 * capabilities dropped, no privilege escalation, only the chart's writable mounts), with
 * Postgres and Redis containers on a user-defined network: each image answers /healthz and a
 * Connect call, and a real MCP client lists, reads, edits with a guard and runs a Job through the
 * gateway container. Needs a Docker engine (the one the docker CLI reaches: DOCKER_HOST or the
 * default socket); without one the suite says "no Docker engine: container suite not run".
 * Missing images of this commit are built first (make images).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { spawnSync } from "node:child_process";
import pg from "pg";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus } from "@webcodex/proto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { callTool, connectMcp, createProjectDir, executeFollowUp, firstProjectRef, until } from "../support/index.js";
import type { ToolOutcome } from "../support/index.js";
import { docker, dockerEngine, ensureServiceImages, imageRef, SERVICE_IMAGES, securityOf, startContainerStack } from "../support/containers.js";
import type { ContainerStack } from "../support/containers.js";

const engine = dockerEngine();

if ("missing" in engine) {
  describe("containers", () => {
    it("no Docker engine: container suite not run", (t) => {
      const line = `no Docker engine: container suite not run (${engine.missing})`;
      console.log(line);
      t.skip(line);
    });
  });
} else {
  const token = `t-${randomBytes(16).toString("hex")}`;
  let stack: ContainerStack;
  let client: Client;
  let project: string;

  before(async () => {
    console.log(`containers: Docker ${engine.version} at ${engine.host}`);
    const built = ensureServiceImages();
    if (built > 0) console.log(`containers: built the missing images in ${built} s`);
    const projectDir = createProjectDir({ "README.md": "# in containers\n", "src/a.ts": "export const x = 1;\n" }, { name: "boxed" });
    stack = await startContainerStack({ projectDir, projectId: "boxed", devToken: token });
    client = await connectMcp(stack.mcpUrl, token);
    project = await firstProjectRef(client);
  });
  after(async () => {
    await client?.close();
    await stack?.stop();
  });

  describe("the six images run with the chart's security context", () => {
    it("each container runs as uid 10001 with a read-only root, no capabilities and no-new-privileges; only /tmp (and the chart's mounts) are writable", (t) => {
      for (const s of SERVICE_IMAGES) {
        const c = stack.containers[s];
        const sec = securityOf(c);
        assert.deepEqual(
          [sec.user, sec.readOnly, sec.capDrop, sec.capAdd, sec.privileged, sec.securityOpt.includes("no-new-privileges")],
          ["10001:10001", true, ["ALL"], [], false, true],
          s,
        );
        // What the process inside sees, not what the engine was told.
        assert.equal(docker(["exec", c, "id", "-u"]), "10001", `${s} runs as 10001`);
        const status = docker(["exec", c, "sh", "-c", "grep -E '^(CapEff|NoNewPrivs):' /proc/1/status"]);
        assert.match(status, /CapEff:\s+0000000000000000/, `${s}: no effective capabilities`);
        assert.match(status, /NoNewPrivs:\s+1/, `${s}: no privilege escalation`);
        const root = spawnSync("docker", ["exec", c, "touch", "/app/written"], { encoding: "utf8" });
        assert.notEqual(root.status, 0, `${s}: the root filesystem refuses writes`);
        assert.match(root.stderr, /Read-only file system/, s);
        docker(["exec", c, "touch", "/tmp/written"]);
        assert.match(docker(["exec", c, "node", "--version"]), /^v24\./, `${s} runs on Node.js 24 LTS`);
      }
      docker(["exec", stack.containers.gateway, "touch", "/var/spool/webcodex/written"]);
      docker(["exec", stack.containers.runner, "touch", "/workspace/.written"]);
      docker(["exec", stack.containers.runner, "rm", "/workspace/.written"]);
      const sizes = SERVICE_IMAGES.map((s) => `${s} ${Math.round(Number(docker(["image", "inspect", "--format", "{{.Size}}", imageRef(s)])) / 1e6)} MB`);
      const starts = SERVICE_IMAGES.map((s) => `${s} ${stack.startMs[s]} ms`);
      t.diagnostic(`image sizes: ${sizes.join(", ")}`);
      t.diagnostic(`start to /healthz: ${starts.join(", ")}`);
      console.log(`containers: image sizes: ${sizes.join(", ")}`);
      console.log(`containers: start to /healthz: ${starts.join(", ")}`);
    });

    it("each service answers /healthz and a Connect call (grpc.health.v1.Health/Check) from outside its container", async () => {
      for (const s of SERVICE_IMAGES) {
        const res = await fetch(`${stack.urls[s]}/healthz`);
        assert.equal(res.status, 200, `${s} /healthz`);
        const health = createClient(Health, createConnectTransport({ baseUrl: stack.urls[s], httpVersion: "2" }));
        const checked = await health.check({ service: "" }, { timeoutMs: 5_000 });
        assert.equal(checked.status, HealthCheckResponse_ServingStatus.SERVING, `${s} Health/Check`);
      }
    });
  });

  describe("a real MCP client through the gateway container", () => {
    it("lists tools and projects, reads a file the Runner container serves, and the call is audited in the Postgres container", async () => {
      const { tools } = await client.listTools();
      for (const name of ["read_files", "edit_project_files", "run_shell"])
        assert.ok(
          tools.some((t) => t.name === name),
          name,
        );
      assert.equal(project, "~p1");
      const read = await callTool(client, "read_files", { project, files: [{ path: "src/a.ts" }] });
      assert.equal(read.isError, false, JSON.stringify(read.result));
      assert.equal((read.result["items"] as Array<Record<string, unknown>>)[0]?.["content"], "export const x = 1;\n");
      const sql = new pg.Client({ connectionString: stack.postgresUrl });
      await sql.connect();
      try {
        let rows: Array<Record<string, unknown>> = [];
        await until(
          "the read_files audit row",
          async () => {
            rows = (await sql.query("SELECT client_id, project_canonical_id, outcome FROM audit.action_audit WHERE tool = 'read_files'")).rows;
            return rows.length > 0;
          },
          10_000,
        );
        assert.deepEqual(rows[0], { client_id: "local", project_canonical_id: "agent:local:boxed", outcome: "success" });
      } finally {
        await sql.end();
      }
    });

    it("edits with a read guard: the guarded edit applies in the workspace volume, a stale guard is refused and changes nothing", async () => {
      const read = await callTool(client, "read_files", { project, files: [{ path: "src/a.ts" }] });
      const revision = String((read.result["items"] as Array<Record<string, unknown>>)[0]?.["read_revision"]);
      const edit = (rev: string, from: string, to: string) =>
        callTool(client, "edit_project_files", {
          project,
          changes: [{ kind: "edit", path: "src/a.ts", expected_read_revision: rev, edits: [{ replace_exact: { old_text: from, new_text: to } }] }],
        });
      const edited = await edit(revision, "x = 1", "x = 2");
      assert.equal(edited.isError, false, JSON.stringify(edited.result));
      assert.equal(docker(["exec", stack.containers.runner, "cat", "/workspace/src/a.ts"]), "export const x = 2;");
      const stale = await edit(revision, "x = 2", "x = 3");
      assert.equal(stale.isError, true, JSON.stringify(stale.result));
      assert.equal(stale.result["state_changed"], false, JSON.stringify(stale.result));
      assert.equal(docker(["exec", stack.containers.runner, "cat", "/workspace/src/a.ts"]), "export const x = 2;", "the stale edit changed nothing");
    });

    it("runs a Job in the Runner container: pending, then followed to its output and exit code", async () => {
      const first = await callTool(client, "run_shell", { project, command: "sleep 2; cat src/a.ts; id -u; exit 3", wait_ms: 200 });
      assert.equal(first.isError, false, JSON.stringify(first.result));
      assert.equal(first.result["execution_state"], "pending", JSON.stringify(first.result));
      let next: ToolOutcome = await executeFollowUp(client, first.result["follow_up"]);
      while (next.result["execution_state"] === "pending") next = await executeFollowUp(client, next.result["follow_up"]);
      assert.equal(next.result["output"], "export const x = 2;\n10001\n", JSON.stringify(next.result));
      assert.equal(next.result["exit_code"], 3);
    });
  });
}
