import type { Database, Migration } from "@webcodex/platform";
import { runMigrations } from "@webcodex/platform";

export const RUNNER_BROKER_SCHEMA = "broker";

/** The runner-broker owns schema `broker`. Never edit a shipped migration; add a new one. */
export const runnerBrokerMigrations: readonly Migration[] = [
  {
    id: "0001_baseline",
    sql: `
-- Per lease scope (Project workspace), the highest fencing token ever handed out. Only
-- raised, by a strict compare-and-set; Redis fence counters are seeded from it.
CREATE TABLE {{schema}}.fence_hwm (
  scope text PRIMARY KEY,
  hwm bigint NOT NULL CHECK (hwm >= 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- One row per Job: opened when the Job starts (so reconciliation can find Jobs whose live
-- state vanished), closed once with its terminal summary. Live progress stays in Redis.
CREATE TABLE {{schema}}.jobs (
  project_canonical_id text NOT NULL,
  job_id text NOT NULL,
  client_id text NOT NULL,
  runner_id text NOT NULL,
  tool text NOT NULL,
  call_id text,
  fence bigint NOT NULL CHECK (fence >= 0),
  state text NOT NULL CHECK (state IN ('queued', 'running', 'recovering', 'succeeded', 'failed', 'cancelled', 'timed_out', 'lost_after_reconcile')),
  created_at timestamptz NOT NULL DEFAULT now(),
  terminal_at timestamptz,
  exit_code integer,
  outcome_unknown boolean NOT NULL DEFAULT false,
  summary jsonb,
  PRIMARY KEY (project_canonical_id, job_id),
  CHECK ((terminal_at IS NULL) = (state IN ('queued', 'running', 'recovering')))
);
CREATE INDEX jobs_open ON {{schema}}.jobs (created_at) WHERE terminal_at IS NULL;
CREATE INDEX jobs_by_client_state ON {{schema}}.jobs (client_id, state, terminal_at);

-- What followed a Job continuation card, as separate observations: the one dispatch (claimed
-- before sending, then the Host's answer), the fresh model turn, and the exact consume.
CREATE TABLE {{schema}}.job_continuations (
  project_canonical_id text NOT NULL,
  job_id text NOT NULL,
  client_id text NOT NULL,
  dispatch text NOT NULL DEFAULT 'none' CHECK (dispatch IN ('none', 'claimed', 'accepted', 'rejected', 'uncertain')),
  presented_at timestamptz NOT NULL DEFAULT now(),
  dispatch_at timestamptz,
  fresh_turn_at timestamptz,
  consumed_at timestamptz,
  PRIMARY KEY (project_canonical_id, job_id)
);
`,
  },
];

/** Applies the broker migrations (idempotent, safe from several replicas). */
export function migrateRunnerBroker(db: Database): Promise<string[]> {
  return runMigrations(db, RUNNER_BROKER_SCHEMA, runnerBrokerMigrations);
}
