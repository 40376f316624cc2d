/**
 * The agent store's rows (Agents, Tasks, Attempts as read from the database), who may see
 * them, the failures that answer "never issued" and "not yours" alike, and the id formats and
 * defaults the agent tools share. (The tools read their arguments as typed fields: see
 * agent-tool-handlers.ts.)
 */

import { randomBytes } from "node:crypto";
import { clampRule, PipelineStage, listAgentTasksFollowUp, readAgentTaskFollowUp, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import type { Principal } from "@webcodex/platform";

export const schema = "refs";
export const AGENT_ID = /^wc_agent_[0-9a-f]{32}$/;
export const TASK_ID = /^wc_task_[0-9a-f]{32}$/;
export const CURSOR = /^(0|[1-9][0-9]{0,17})$/;
export const hex = () => randomBytes(16).toString("hex");

export const DEFAULT_LEASE_MS = clampRule("start_agent_task_attempt", "lease_ms").default;
export const DEFAULT_EVENT_WAIT_MS = clampRule("wait_for_agent_events", "wait_ms").default;
/** Events returned by one wait_for_agent_events call at most; the cursor continues. */
export const EVENTS_PAGE = 100;
export const LIST_LIMIT = clampRule("list_agent_tasks", "limit");

// ── failures: the same answer for "never issued" and "not yours" ──
export const notFound = (what: "agent" | "task" | "attempt" | "attempt_ref" | "cursor", followUp?: boolean): ToolFailure =>
  toolFailure(ReasonCode.invalidValue, PipelineStage.resolution, {
    detail_code: `${what}_not_found`,
    message: `No such ${what.replace(/_/g, " ")} for this caller.`,
    ...(followUp ? { follow_up: listAgentTasksFollowUp() } : {}),
  });

export const fenceStale = (detail: string, taskId: string, evidence: Record<string, unknown> = {}): ToolFailure =>
  toolFailure(ReasonCode.fenceStale, PipelineStage.authorization, {
    detail_code: detail,
    evidence,
    message: "This attempt no longer holds its task's fence; nothing was done.",
    follow_up: readAgentTaskFollowUp(taskId),
  });

export const invalid = (detail: string, field: string, message?: string): ToolFailure =>
  toolFailure(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: detail, evidence: { field }, ...(message ? { message } : {}) });

/** Sorted-key JSON, so equal arguments give one digest whatever their key order. */
export function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}

export const iso = (v: unknown): string => (v instanceof Date ? v : new Date(String(v))).toISOString();

export interface AgentRow {
  agent_id: string;
  client_id: string;
  subject: string;
  endpoint_id: string;
  last_event_seq: string;
  controller_generation: string;
}

export interface TaskRow {
  task_id: string;
  client_id: string;
  creator_subject: string;
  project_canonical_id: string;
  project_incarnation: string;
  title: string;
  instructions: string;
  assignee_agent_id: string;
  requester_agent_id: string | null;
  state: string;
  current_fence: string;
  summary: string | null;
  stop_reason: string | null;
  created_at: Date | string;
  updated_at: Date | string;
  assignee_subject: string;
}

export interface AttemptRow {
  attempt_id: string;
  task_id: string;
  client_id: string;
  subject: string;
  assignee_agent_id: string;
  attempt_fence: string;
  controller_generation: string;
  state: string;
  lease_ms: number;
  lease_expires_at: Date | string;
  lease_live: boolean;
  summary: string | null;
}

export const ownedBy = (row: { client_id: string; subject: string }, p: Principal) => row.client_id === p.clientId && row.subject === p.subject;
export const canSeeTask = (t: TaskRow, p: Principal) => t.client_id === p.clientId && (t.creator_subject === p.subject || t.assignee_subject === p.subject);
