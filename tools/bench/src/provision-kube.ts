/**
 * `make bench provision`, Kubernetes part: create_project's provisioning (the broker's fleet
 * provisioner) until the new Project's Runner registers with the broker, warm (a pod claimed
 * from the warm pool) against cold (a new pod), against the fake Kubernetes API server, in
 * alternating rounds. The fake API has no kubelet, so this bench is one: each pod it sees is run
 * as a real `webcodex runner` process with the pod's environment (its warm token or credential
 * from the pod's Secrets, its PVC as a directory), and the pod is reported Running and Ready
 * once the process answers /readyz. What is measured is therefore the API round trips, the
 * Runner process start (Node and the Runner's modules) and the claim RPC; a real cluster adds
 * scheduling, image pull, volume attach and container start to the cold path only (the warm pod
 * paid them before the claim), so its ratio would be lower still. Figure: p50 of each side and
 * warm/cold, the median of the per-round ratios.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createLogger, startServiceServer } from "@webcodex/platform";
import { RunnerBrokerService } from "@webcodex/proto";
import { runnerCredential, warmToken } from "@webcodex/runner-broker";
import type { Provisioner } from "@webcodex/runner-broker";
import { fakeKubeConfig, startFakeKubeApi } from "@webcodex/runner-broker/testing/fake-kube-api";
import type { FakeKubeApi, KubeObject } from "@webcodex/runner-broker/testing/fake-kube-api";
import { startTestFleet } from "@webcodex/runner-broker/testing/test-fleet";
import { FLEET_NAMESPACE as NS, fleetTemplate } from "./fleet.js";
import { warmColdRounds } from "./provision.js";
import type { BenchResult } from "./stats.js";

const KEY = "bench-runner-key";
const cliPath = fileURLToPath(new URL("../../cli/bin/webcodex.js", import.meta.url));
const logger = createLogger({ service: "bench", level: "silent" });

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });

type Env = Array<{ name: string; value?: string }>;
const secretValue = (api: FakeKubeApi, name: string, key: string) => {
  const data = api.get("secrets", NS, name)?.["data"] as Record<string, string> | undefined;
  return data?.[key] ? Buffer.from(data[key], "base64").toString() : undefined;
};

/** Runs every pod of one fake cluster as a local Runner process (a kubelet's part). */
function fakeKubelet(api: FakeKubeApi, dir: string, brokerUrl: string) {
  const procs = new Map<string, { proc: ChildProcess; port: number }>();
  const seen = new Set<string>();
  let stopped = false;
  const start = async (pod: KubeObject) => {
    const name = pod.metadata.name;
    const port = await freePort();
    const podDir = join(dir, "pods", name);
    const spec = pod.spec as { containers: Array<{ env: Env }>; volumes: Array<{ name: string; persistentVolumeClaim?: { claimName: string } }> };
    const claim = spec.volumes.find((v) => v.name === "workspace")?.persistentVolumeClaim?.claimName ?? name;
    const root = join(dir, "volumes", claim);
    mkdirSync(root, { recursive: true });
    mkdirSync(join(podDir, "tmp"), { recursive: true });
    const env: Record<string, string> = {};
    for (const e of spec.containers[0]!.env) if (e.value !== undefined) env[e.name] = e.value;
    const file = (sub: string, value: string | undefined) => {
      const path = join(podDir, sub);
      mkdirSync(join(path, ".."), { recursive: true });
      if (value !== undefined) writeFileSync(path, value, { mode: 0o400 });
      return path;
    };
    if (env["WEBCODEX_RUNNER_WARM_TOKEN_FILE"]) env["WEBCODEX_RUNNER_WARM_TOKEN_FILE"] = file("warm/token", secretValue(api, `${name}-warm`, "token"));
    if (env["WEBCODEX_RUNNER_WARM_CREDENTIAL_FILE"]) env["WEBCODEX_RUNNER_WARM_CREDENTIAL_FILE"] = file("credential/credential", undefined);
    if (env["WEBCODEX_RUNNER_TOKEN_FILE"])
      env["WEBCODEX_RUNNER_TOKEN_FILE"] = file("credential/credential", secretValue(api, `${name}-credential`, "credential"));
    const proc = spawn(process.execPath, [cliPath, "runner"], {
      env: {
        PATH: process.env["PATH"] ?? "",
        HOME: join(podDir, "tmp"),
        ...env,
        WEBCODEX_PORT: String(port),
        WEBCODEX_RUNNER_ROOT: root,
        WEBCODEX_RUNNER_STATE_DIR: join(podDir, "tmp"),
        WEBCODEX_RUNNER_BROKER_URL: brokerUrl,
        WEBCODEX_RUNNER_SANDBOX: "off",
        WEBCODEX_LOG_LEVEL: "error",
      },
      stdio: ["ignore", "ignore", "ignore"],
    });
    procs.set(name, { proc, port });
    for (;;) {
      if (stopped || proc.exitCode !== null) return;
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    if (api.get("pods", NS, name)) api.setPodStatus(NS, name, { phase: "Running", podIP: "127.0.0.1", conditions: [{ type: "Ready", status: "True" }] });
  };
  const timer = setInterval(() => {
    const live = new Set<string>();
    for (const pod of api.list("pods", NS)) {
      live.add(pod.metadata.name);
      if (seen.has(pod.metadata.name)) continue;
      seen.add(pod.metadata.name);
      void start(pod);
    }
    for (const [name, p] of procs) if (!live.has(name) && p.proc.exitCode === null) p.proc.kill("SIGKILL");
  }, 10);
  return {
    portOf: (pod: string) => procs.get(pod)?.port,
    stop() {
      stopped = true;
      clearInterval(timer);
      for (const p of procs.values()) if (p.proc.exitCode === null) p.proc.kill("SIGKILL");
    },
  };
}

export async function benchProvisionKube(): Promise<BenchResult> {
  const registered = new Set<string>();
  const broker = await startServiceServer({
    name: "bench-broker",
    port: 0,
    logger,
    routes: (router) =>
      router.service(RunnerBrokerService, {
        registerRunner(req) {
          registered.add(req.projectId);
          return {};
        },
        heartbeat() {
          return {};
        },
      }),
  });
  const dir = mkdtempSync(join(tmpdir(), "wcx-bench-kube-provision-"));
  const template = fleetTemplate();
  const side = async (name: string, size: number) => {
    const api = await startFakeKubeApi();
    const kubelet = fakeKubelet(api, join(dir, name), broker.url);
    const kubeConfig = await fakeKubeConfig(api);
    const { fleet, p } = await startTestFleet({
      kubeConfig,
      template,
      identity: name,
      idleTimeoutMs: 0,
      resyncMs: 300_000,
      credentialFor: (w) => runnerCredential(KEY, w),
      warmPool: {
        size,
        tokenFor: (pod) => warmToken(KEY, pod),
        address: (p) => (kubelet.portOf(p.name) ? `http://127.0.0.1:${kubelet.portOf(p.name)}` : undefined),
      },
      logger,
    });
    return { api, kubelet, fleet, p };
  };
  const cold = await side("cold", 0);
  const warm = await side("warm", 1);
  /** create_project's provisioning until the Project's Runner registers; ms. */
  const provision = async (p: Provisioner, projectId: string) => {
    const t0 = performance.now();
    await p.ensureRunner({ clientId: "bench", projectId }, { source: {} });
    const deadline = Date.now() + 60_000;
    while (!registered.has(projectId)) {
      if (Date.now() > deadline) throw new Error(`provision bench (kubernetes): ${projectId} did not register in 60 s`);
      await new Promise((r) => setTimeout(r, 5));
    }
    return performance.now() - t0;
  };
  try {
    let claimed = 0;
    const { rounds, ...figures } = await warmColdRounds({
      bench: "provision bench (kubernetes)",
      warmReady: () => warm.fleet.warmReady(),
      pollMs: 20,
      cold: (r) => provision(cold.p, `cold-${r}`),
      async warm(r) {
        const before = warm.api.list("pods", NS, "webcodex.dev/warm=true").map((o) => o.metadata.name);
        const ms = await provision(warm.p, `warm-${r}`);
        if (before.some((n) => warm.api.get("pods", NS, n)?.metadata.labels?.["webcodex.dev/warm"] === undefined)) claimed++;
        return ms;
      },
    });
    return {
      name: "provision_kubernetes",
      metrics: { ...figures, warm_claims: claimed, rounds },
      notes:
        "fake Kubernetes API, each pod run as a local Runner process: create_project until the Runner registers, claimed warm pod vs new pod; no scheduling, image pull or volume attach (a real cluster adds those to cold only)",
    };
  } finally {
    for (const s of [cold, warm]) {
      await s.p.close().catch(() => undefined);
      s.kubelet.stop();
      await s.api.close();
    }
    await broker.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
