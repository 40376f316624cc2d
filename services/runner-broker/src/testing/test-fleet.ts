/**
 * The Kubernetes provisioner under the fleet, as the broker's tests and benchmarks start it
 * against one (fake) cluster: `startFleet` with the chart's anchor and lease names, one
 * unavailable Runner at a time and the template's namespace, wrapping a Kubernetes provisioner
 * whose objects the fleet's anchor owns.
 */
import { startFleet } from "../fleet/fleet-provisioner.js";
import type { FleetSettings } from "../fleet/fleet-provisioner.js";
import type { FleetReconciler } from "../fleet/reconciler.js";
import { createKubernetesProvisioner } from "../provisioning/kubernetes.js";
import type { Provisioner } from "../provisioning/provisioner.js";

/** The cluster, the template and the logger; any other fleet setting replaces its default. */
export type TestFleetOptions = Pick<FleetSettings, "kubeConfig" | "template" | "logger"> & Partial<FleetSettings>;

/** Starts the fleet (identity "broker-0", idle timeout and resync 60 s, no quota unless given) and its provisioner. */
export async function startTestFleet(o: TestFleetOptions): Promise<{ fleet: FleetReconciler; p: Provisioner; stop: () => Promise<void> }> {
  const { template, kubeConfig, logger } = o;
  const f = await startFleet({
    namespace: template.namespace,
    anchorName: "wcx-runner-anchor",
    leaseName: "wcx-fleet",
    identity: "broker-0",
    idleTimeoutMs: 60_000,
    maxUnavailable: 1,
    resyncMs: 60_000,
    quota: {},
    ...o,
  });
  const credential = o.credentialFor ? { credentialFor: o.credentialFor } : {};
  const namespace = o.namespace ?? template.namespace;
  const base = await createKubernetesProvisioner({ template, kubeConfig, namespace, ...credential, owners: () => f.fleet.owners(), logger });
  return { fleet: f.fleet, p: f.wrap(base), stop: f.stop };
}
