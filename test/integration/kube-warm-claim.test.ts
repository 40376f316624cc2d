/**
 * A warm Runner pod's claim, with the real Runner (`webcodex runner`, WEBCODEX_RUNNER_WARM=1 and
 * a warm token file, as the warm pool's pod runs it) and the broker's fleet against the fake
 * Kubernetes API server: before its claim it is Ready and refuses a wrong token; create_project
 * claims it (the pool's pod is relabelled to the Project); it then serves that Project on the
 * same port with the credential the claim carried and registers with the broker at its address
 * (what the broker routes by); a second claim is refused; and a restarted container of the
 * claimed pod serves the same Project without a claim.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createLogger, createServiceTransport, startServiceServer } from "@webcodex/platform";
import type { ServiceServer } from "@webcodex/platform";
import { RunnerBrokerService, RunnerService, RunnerWarmService } from "@webcodex/proto";
import type { RegisterRunnerRequest } from "@webcodex/proto";
import { runnerCredential, runnerCredentialHeaders } from "@webcodex/runner-broker";
import { fakeKubeConfig, startFakeKubeApi } from "@webcodex/runner-broker/testing/fake-kube-api";
import type { FakeKubeApi } from "@webcodex/runner-broker/testing/fake-kube-api";
import { testRunnerPodTemplate } from "@webcodex/runner-broker/testing/runner-template";
import { startTestFleet } from "@webcodex/runner-broker/testing/test-fleet";
import { cliPath, scratchDir } from "../support/processes.js";
import { until } from "../support/until.js";
import { freePort } from "../support/ports.js";

const logger = createLogger({ service: "test", level: "silent" });
const NS = "runners";
const KEY = "runner-key";
const WARM_TOKEN = "wcw1.the-pods-own-token";

describe("a warm Runner pod's claim (real Runner, fake Kubernetes API)", () => {
  let api: FakeKubeApi;
  let broker: ServiceServer;
  const registrations: RegisterRunnerRequest[] = [];
  const children: ChildProcess[] = [];
  const dir = scratchDir("wcx-warm-claim-");
  let port: number;

  const startWarm = async () => {
    const child = spawn(process.execPath, [cliPath, "runner"], {
      env: {
        PATH: process.env["PATH"] ?? "",
        HOME: dir,
        WEBCODEX_RUNNER_WARM: "1",
        WEBCODEX_RUNNER_WARM_TOKEN_FILE: join(dir, "warm", "token"),
        WEBCODEX_RUNNER_WARM_CREDENTIAL_FILE: join(dir, "credential", "credential"),
        WEBCODEX_RUNNER_STATE_DIR: join(dir, "state"),
        WEBCODEX_RUNNER_ROOT: join(dir, "workspace"),
        WEBCODEX_RUNNER_BROKER_URL: broker.url,
        WEBCODEX_RUNNER_SANDBOX: "off",
        WEBCODEX_PORT: String(port),
        WEBCODEX_LOG_LEVEL: "warn",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    let out = "";
    child.stdout?.setEncoding("utf8").on("data", (c: string) => (out += c));
    child.stderr?.setEncoding("utf8").on("data", (c: string) => (out += c));
    return { child, out: () => out };
  };

  before(async () => {
    api = await startFakeKubeApi({ autoRunPods: true });
    broker = await startServiceServer({
      name: "broker-stand-in",
      port: 0,
      logger,
      routes: (router) =>
        router.service(RunnerBrokerService, {
          registerRunner(req) {
            registrations.push(req);
            return {};
          },
          heartbeat() {
            return {};
          },
        }),
    });
    port = await freePort();
    for (const d of ["warm", "credential", "state", "workspace"]) mkdirSync(join(dir, d), { recursive: true });
    writeFileSync(join(dir, "warm", "token"), `${WARM_TOKEN}\n`, { mode: 0o400 });
  });
  after(async () => {
    for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
    await broker.close();
    await api.close();
  });

  it("is claimed once by create_project, then serves the Project on its port with the claimed credential; a restart keeps serving it", async () => {
    const warm = await startWarm();
    await until("the warm ready line", () => warm.out().includes("webcodex-runner-warm"), 60_000);
    const url = `http://127.0.0.1:${port}`;
    const readyz = await fetch(`${url}/readyz`);
    assert.equal(readyz.status, 200, "a warm Runner is Ready before any claim");
    const claimClient = createClient(RunnerWarmService, createServiceTransport(url));
    await assert.rejects(claimClient.claim({ warmToken: "wcw1.someone-elses", clientId: "x", projectId: "y" }), /not this Runner's/);

    const template = testRunnerPodTemplate({ namespace: NS, port });
    const kubeConfig = await fakeKubeConfig(api);
    const credentialFor = (w: { clientId: string; projectId: string }) => runnerCredential(KEY, w);
    const { fleet, p } = await startTestFleet({
      kubeConfig,
      template,
      idleTimeoutMs: 0,
      credentialFor,
      // One warm pod in the fake cluster; its Runner is the process above (its token, its port).
      warmPool: { size: 1, tokenFor: () => WARM_TOKEN, address: () => url },
      logger,
    });
    try {
      await until("a Ready warm pod", () => fleet.warmReady() === 1);
      const w = { clientId: "tenant-a", projectId: "app" };
      const claimed = await p.ensureRunner(w, { source: {} });
      assert.match(claimed.name, /^wcx-runner-warm-/);
      assert.equal(api.get("pods", NS, claimed.name)?.metadata.labels?.["webcodex.dev/project"]?.startsWith("p-"), true);

      // The Runner serves the Project on the same port, and only with that Project's credential.
      const runner = createClient(RunnerService, createServiceTransport(url));
      let described: { runnerId: string } | undefined;
      await until(
        "the claimed Runner to serve",
        async () => {
          described = await runner.describe({}, { headers: runnerCredentialHeaders(KEY, w) }).catch(() => undefined);
          return described !== undefined;
        },
        60_000,
      );
      await assert.rejects(runner.describe({}, { headers: runnerCredentialHeaders(KEY, { clientId: "tenant-a", projectId: "other" }) }));
      await until("its registration", () => registrations.some((r) => r.projectId === "app"), 30_000);
      const reg = registrations.find((r) => r.projectId === "app")!;
      assert.equal(reg.clientId, "tenant-a");
      assert.equal(reg.endpointUrl.endsWith(`:${port}`), true, "it registers at the claimed pod's port: the broker routes there");

      // A second claim, even with the pod's own token, is refused.
      await assert.rejects(claimClient.claim({ warmToken: WARM_TOKEN, clientId: "tenant-b", projectId: "stolen" }));
      assert.ok(await runner.describe({}, { headers: runnerCredentialHeaders(KEY, w) }), "still the first Project's Runner");

      // The container restarts: the claim record and the credential its Secret now mounts make it the same Project's Runner again.
      warm.child.kill("SIGTERM");
      await until("its exit", () => warm.child.exitCode !== null || warm.child.signalCode !== null, 20_000);
      writeFileSync(join(dir, "credential", "credential"), credentialFor(w), { mode: 0o400 });
      registrations.length = 0;
      const again = await startWarm();
      await until("its registration after the restart", () => registrations.some((r) => r.projectId === "app"), 60_000);
      assert.ok(await runner.describe({}, { headers: runnerCredentialHeaders(KEY, w) }));
      assert.equal(again.out().includes("webcodex-runner-warm"), false, "it did not wait for a claim");
    } finally {
      await p.close();
    }
  });
});
