// Public surface of @webcodex/runner-broker.
export { createRunnerBroker, DEFAULT_PROJECT_CONCURRENCY } from "./broker.js";
export type { RunnerBrokerDeps } from "./broker.js";
export { createMemoryRunnerRegistry, createRedisRunnerRegistry } from "./runner-registry.js";
export type { RunnerRegistry, RunnerRegistration, RunnerState, RegistryOptions } from "./runner-registry.js";
export { createLeaseStore, createMemoryLeaseBackend, FenceUnavailableError } from "./leases/lease-store.js";
export type { Lease, LeaseAcquisition, LeaseStore, LeaseBackend, GrantResult } from "./leases/lease-store.js";
export { createRedisLeaseBackend } from "./leases/redis-lease-backend.js";
export { createPostgresFenceHighWaterMark, createMemoryFenceHighWaterMark } from "./leases/fence-hwm.js";
export type { FenceHighWaterMark } from "./leases/fence-hwm.js";
export { createMemoryConcurrencyLimiter, createRedisConcurrencyLimiter } from "./admission/concurrency.js";
export type { ConcurrencyLimiter, SlotAdmission } from "./admission/concurrency.js";
export { createJobContinuationStore, DISPATCH_STATES } from "./jobs/job-continuations.js";
export type { JobContinuationStore, JobContinuationRecord, DispatchState, ContinuationAction } from "./jobs/job-continuations.js";
export { createJobStore, startJobReconciler, LIVE_JOB_STATES, TERMINAL_JOB_STATES } from "./jobs/job-store.js";
export type {
  JobStore,
  JobKey,
  JobStart,
  JobTerminal,
  JobRecord,
  JobCounts,
  JobState,
  LiveJob,
  LiveJobState,
  TerminalJobState,
  FencedWrite,
  LiveJobBackend,
  JobStoreOptions,
} from "./jobs/job-store.js";
export { createMemoryLiveJobBackend, createRedisLiveJobBackend } from "./jobs/live-job-backends.js";
export { observeFleet, summarizeFleet, fleetRows } from "./fleet/fleet-status.js";
export { createFleetReconciler, CREDENTIAL_FINGERPRINT_ANNOTATION, DEFAULT_IDLE_TIMEOUT_MS } from "./fleet/reconciler.js";
export { podFleetState, quotaExceededFailure } from "./fleet/pod-state.js";
export type { FleetReconciler, FleetReconcilerOptions, FleetQuota, ReconcileReport, TouchResult } from "./fleet/reconciler.js";
export type { RunnerFleetState } from "./fleet/pod-state.js";
export { createLeaderElector } from "./fleet/leader.js";
export { startFleet } from "./fleet/fleet-provisioner.js";
export { buildWarmObjects, warmToken, WARM_LABEL } from "./fleet/warm-pods.js";
export type { KubeWarmPoolOptions } from "./fleet/kube-warm-pool.js";
export type { LeaderElector, LeaderElectorOptions } from "./fleet/leader.js";
export type { FleetObservation, FleetSummaryFacts, FleetRow } from "./fleet/fleet-status.js";
export { runnerNames } from "./provisioning/provisioner.js";
export type { Provisioner, ProjectWorkspace, EnsureResult, EnsureAction, RunnerNames, ProvisioningState, WorkspaceSource } from "./provisioning/provisioner.js";
export {
  createKubernetesProvisioner,
  buildRunnerObjects,
  loadRunnerPodTemplate,
  parseRunnerPodTemplate,
  runnerPodName,
  templateHash,
  TEMPLATE_HASH_ANNOTATION,
} from "./provisioning/kubernetes.js";
export type { KubernetesProvisionerOptions, RunnerPodTemplate } from "./provisioning/kubernetes.js";
export { createLocalProcessProvisioner } from "./provisioning/local-process.js";
export type { LocalProcessProvisioner, LocalProcessProvisionerOptions, LocalRunnerProcess } from "./provisioning/local-process.js";
export { migrateRunnerBroker, runnerBrokerMigrations, RUNNER_BROKER_SCHEMA } from "./migrations.js";
export { RUNNER_TOKEN_HEADER, runnerCredential, runnerCredentialCheck, runnerCredentialHeaders } from "./runner-auth.js";
export type { CredentialScope } from "./runner-auth.js";
export { routes } from "./routes.js";
export { createDistributedStores } from "./distributed-stores.js";
export type { DistributedStores, DistributedStoresOptions } from "./distributed-stores.js";
export { startJobGauge, JOB_GAUGE_INTERVAL_MS } from "./jobs/job-gauge.js";
export { createConfiguredProvisioner } from "./provisioning/from-config.js";
export type { RunnerBrokerConfig } from "./config.js";
export { main } from "./main.js";
