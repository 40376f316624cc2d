/**
 * What the fleet reconciler reads off a Runner pod (the facts its cache keeps) and what it makes
 * of them: the Runner's state per Kubernetes condition, each with a detail code of its own, and
 * the refusal of a start over the tenant's live-Runner quota.
 */
import { PipelineStage, ReasonCode, toolFailure, waitForProjectFollowUp } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import type { V1Pod } from "@kubernetes/client-node";
import { CREDENTIAL_FINGERPRINT_ANNOTATION, TEMPLATE_HASH_ANNOTATION } from "../provisioning/kubernetes.js";

/** On warm pool pods and PVCs: "true" while unclaimed; the claim removes it. */
export const WARM_LABEL = "webcodex.dev/warm";

/** How long an unschedulable pod counts as waiting for a node (a cluster autoscaler adding one) before it is reported stuck. */
export const DEFAULT_PENDING_NODE_GRACE_MS = 5 * 60_000;

/** What one Runner is doing, per Kubernetes condition, with a detail code of its own. */
export interface RunnerFleetState {
  state: "ready" | "starting" | "stopped" | "failed" | "refused" | "absent";
  detail_code?: string;
  message?: string;
  retry_after_ms?: number;
  evidence?: Record<string, unknown>;
}

/** The part of a pod the reconciler keeps (the cache holds these, not whole pods). */
export interface PodFacts {
  name: string;
  project: string;
  tenant: string;
  hash: string;
  fingerprint: string;
  phase: string;
  ready: boolean;
  terminating: boolean;
  createdMs: number;
  waitingReason?: string;
  waitingMessage?: string;
  unschedulable?: { reason: string; message: string };
  terminatedMessage?: string;
  /** An unclaimed warm pool pod (label webcodex.dev/warm=true): no tenant, no project. */
  warm: boolean;
  podIP?: string;
}

export function quotaExceededFailure(limit: number, use: number, canonicalId: string): ToolFailure {
  return toolFailure(ReasonCode.quotaExceeded, PipelineStage.dispatch, {
    detail_code: "live_runners",
    evidence: { quota: "live_runners", limit, use },
    message: `Your tenant runs ${use} of its ${limit} live Runners; nothing was run. A Runner stops after its idle timeout, then this project can start.`,
    follow_up: waitForProjectFollowUp(canonicalId),
  });
}

/** A pod's state per condition; pending for a node within the grace counts as starting. */
export function podFleetState(p: PodFacts, nowMs: number, pendingNodeGraceMs = DEFAULT_PENDING_NODE_GRACE_MS): RunnerFleetState {
  if (p.terminating) return { state: "starting", detail_code: "runner_replacing", retry_after_ms: 2_000 };
  if (p.phase === "Running" && p.ready) return { state: "ready" };
  if (p.phase === "Failed" || p.phase === "Succeeded")
    return { state: "starting", detail_code: "runner_replacing", message: "The Runner's pod ended; it is being replaced.", retry_after_ms: 2_000 };
  const w = p.waitingReason;
  const msg = (p.waitingMessage ?? "").slice(0, 500);
  if (w === "CrashLoopBackOff")
    return {
      state: "failed",
      detail_code: "runner_crash_loop",
      message: `The Runner keeps crashing: ${msg || (p.terminatedMessage ?? "").slice(0, 500)}`,
      retry_after_ms: 30_000,
    };
  if (w === "ImagePullBackOff" || w === "ErrImagePull" || w === "InvalidImageName")
    return { state: "failed", detail_code: "runner_image_pull", message: `The Runner image cannot be pulled: ${msg}`, retry_after_ms: 60_000 };
  if (w === "CreateContainerConfigError" || w === "CreateContainerError")
    return { state: "failed", detail_code: "runner_config_error", message: `The Runner container cannot be created: ${msg}`, retry_after_ms: 60_000 };
  if (p.unschedulable) {
    const waited = nowMs - p.createdMs;
    if (waited < pendingNodeGraceMs)
      return { state: "starting", detail_code: "runner_waiting_for_node", message: p.unschedulable.message.slice(0, 500), retry_after_ms: 10_000 };
    return {
      state: "failed",
      detail_code: "runner_unschedulable",
      message: p.unschedulable.message.slice(0, 500),
      evidence: { reason: p.unschedulable.reason, pending_ms: waited },
      retry_after_ms: 60_000,
    };
  }
  return { state: "starting", detail_code: "runner_starting", retry_after_ms: 2_000 };
}

export function podFacts(pod: V1Pod, projectLabelKey: string, tenantLabelKey: string): PodFacts {
  const m = pod.metadata ?? {};
  const st = pod.status;
  const c = st?.containerStatuses?.[0];
  const unsched = st?.conditions?.find((x) => x.type === "PodScheduled" && x.status === "False");
  const created = m.creationTimestamp as unknown;
  return {
    name: m.name ?? "",
    project: m.labels?.[projectLabelKey] ?? "",
    tenant: m.labels?.[tenantLabelKey] ?? "",
    hash: m.annotations?.[TEMPLATE_HASH_ANNOTATION] ?? "",
    fingerprint: m.annotations?.[CREDENTIAL_FINGERPRINT_ANNOTATION] ?? "",
    phase: st?.phase ?? "Pending",
    ready: st?.conditions?.some((x) => x.type === "Ready" && x.status === "True") ?? false,
    terminating: m.deletionTimestamp !== undefined && m.deletionTimestamp !== null,
    createdMs: created instanceof Date ? created.getTime() : typeof created === "string" ? Date.parse(created) : Date.now(),
    ...(c?.state?.waiting?.reason ? { waitingReason: c.state.waiting.reason, waitingMessage: c.state.waiting.message ?? "" } : {}),
    ...(unsched ? { unschedulable: { reason: unsched.reason ?? "Unschedulable", message: unsched.message ?? "" } } : {}),
    ...(c?.lastState?.terminated?.message ? { terminatedMessage: c.lastState.terminated.message } : {}),
    warm: m.labels?.[WARM_LABEL] === "true",
    ...(st?.podIP ? { podIP: st.podIP } : {}),
  };
}
