/**
 * `make bench fleet`: the broker's fleet reconciler against the fake Kubernetes API server with
 * 10,000 Projects and 1,000 live Runners. The fake API runs in this process; the reconciler runs
 * in a child process of its own (fleet-child.ts), so its resident memory is the broker's share
 * alone. Figures: first full sync (list + watch + pass), full resync (re-list + pass, median of
 * 5), watch events/s handled during a burst of pod status changes, API calls/min of the
 * reconciler in steady state, and the child's RSS (current and peak).
 * Targets: full resync < 5 s, broker RSS < 300 MiB.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { buildRunnerObjects, parseRunnerPodTemplate } from "@webcodex/runner-broker";
import { startFakeKubeApi } from "@webcodex/runner-broker/testing/fake-kube-api";
import type { KubeObject } from "@webcodex/runner-broker/testing/fake-kube-api";
import type { BenchResult } from "./stats.js";

export const FLEET_PROJECTS = Number(process.env["WEBCODEX_BENCH_FLEET_PROJECTS"] ?? 10_000);
export const FLEET_LIVE = Number(process.env["WEBCODEX_BENCH_FLEET_LIVE"] ?? 1_000);
export const FLEET_NAMESPACE = "runners";

/** The Runner pod template both processes use (the chart's shape, trimmed). */
export const fleetTemplate = () =>
  parseRunnerPodTemplate({
    namespace: FLEET_NAMESPACE,
    serviceAccountName: "runner",
    image: "ghcr.io/webcodex/runner:0.1.0",
    imagePullPolicy: "IfNotPresent",
    port: 8085,
    labels: { "app.kubernetes.io/instance": "wcx", "app.kubernetes.io/component": "runner", "app.kubernetes.io/name": "webcodex" },
    tenantLabelKey: "webcodex.dev/tenant",
    projectLabelKey: "webcodex.dev/project",
    resources: { limits: { cpu: "2", memory: "2Gi" }, requests: { cpu: "250m", memory: "512Mi" } },
    storageSize: "10Gi",
    storageAccessModes: ["ReadWriteOnce"],
    automountServiceAccountToken: false,
    podSecurityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001 },
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
    args: ["node", "tools/cli/bin/webcodex.js", "runner"],
    workspaceMountPath: "/workspace",
    tmpSizeLimit: "1Gi",
    env: [{ name: "WEBCODEX_PORT", value: "8085" }],
    release: "wcx",
  });

/** Project i of the bench: 100 tenants. */
export const fleetProject = (i: number) => ({ clientId: `tenant-${i % 100}`, projectId: `project-${i}` });

interface ChildReport {
  firstSyncMs: number;
  resyncMs: number[];
  watchEventsPerSec: number;
  apiCallsPerMin: number;
  rssMiB: number;
  peakRssMiB: number;
  actionsFirstSync: number;
}

export async function benchFleet(): Promise<BenchResult[]> {
  const api = await startFakeKubeApi({ autoRunPods: true, eventWindow: 20_000 });
  const t = fleetTemplate();
  const anchor = api.put("configmaps", { metadata: { name: "wcx-runner-anchor", namespace: FLEET_NAMESPACE } });
  const owner = [{ apiVersion: "v1", kind: "ConfigMap", name: "wcx-runner-anchor", uid: anchor.metadata.uid ?? "" }];
  for (let i = 0; i < FLEET_LIVE; i++) {
    const { pod } = buildRunnerObjects(t, fleetProject(i));
    const obj = pod as unknown as KubeObject;
    obj.metadata.ownerReferences = owner;
    api.put("pods", obj);
  }
  const childPath = fileURLToPath(new URL("./fleet-child.js", import.meta.url));
  const child = fork(childPath, [api.url], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  try {
    const report = await new Promise<ChildReport>((resolve, reject) => {
      child.on("message", (m: { type: string; report?: ChildReport }) => {
        if (m.type === "synced") {
          // A burst of kubelet status changes: every live pod flips to not-ready and back.
          void (async () => {
            const names = api.list("pods", FLEET_NAMESPACE).map((p) => p.metadata.name);
            for (const n of names) api.setPodStatus(FLEET_NAMESPACE, n, { phase: "Running", conditions: [{ type: "Ready", status: "False" }] });
            for (const n of names) api.setPodStatus(FLEET_NAMESPACE, n, { phase: "Running", conditions: [{ type: "Ready", status: "True" }] });
            child.send({ type: "burst-sent", events: names.length * 2 });
          })();
        }
        if (m.type === "report" && m.report) resolve(m.report);
      });
      child.on("exit", (code) => reject(new Error(`fleet bench child exited ${code}`)));
      child.on("error", reject);
    });
    const sorted = [...report.resyncMs].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
    const r = (v: number, d = 1) => Math.round(v * 10 ** d) / 10 ** d;
    const resultRow: BenchResult = {
      name: `fleet reconcile (${FLEET_PROJECTS} projects, ${FLEET_LIVE} live Runners, fake API)`,
      metrics: {
        first_sync_ms: r(report.firstSyncMs),
        full_resync_ms: r(median),
        full_resync_target_ms: 5_000,
        watch_events_per_s: r(report.watchEventsPerSec, 0),
        api_calls_per_min: r(report.apiCallsPerMin, 0),
        broker_rss_mib: r(report.rssMiB),
        broker_peak_rss_mib: r(report.peakRssMiB),
        broker_rss_target_mib: 300,
        first_sync_actions: report.actionsFirstSync,
      },
      notes: "the reconciler in a process of its own against an in-process fake API server; resync = re-list + one pass (median of 5)",
    };
    return [resultRow];
  } finally {
    child.kill();
    await api.close();
  }
}
