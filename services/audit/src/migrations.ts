import type { Migration } from "@webcodex/platform";

/**
 * The audit service owns schema `audit`. ActionAudit is append-only: row triggers refuse
 * UPDATE/DELETE on every partition, a statement trigger refuses TRUNCATE; the only way rows
 * leave is the retention job dropping whole expired partitions (partitions.ts).
 */
export const auditMigrations: readonly Migration[] = [
  {
    // A partitioned table's unique key must contain the partition key: idempotency is by
    // (call_id, started_at), and the gateway fixes started_at once per call (a replay sends
    // the same pair). Partitions (one per UTC day) are created by partitions.ts, ahead of
    // time and on demand; there is no default partition, so a partition can always be added.
    // The CHECKs keep free text out: codes are snake_case words, shape hashes are hex.
    id: "0001_baseline",
    sql: `
CREATE FUNCTION {{schema}}.action_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'action_audit is append-only';
END $$;
CREATE TABLE {{schema}}.action_audit (
  call_id text NOT NULL CHECK (length(call_id) BETWEEN 1 AND 64),
  started_at timestamptz NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  client_id text NOT NULL,
  subject text NOT NULL,
  tool text NOT NULL CHECK (tool ~ '^[a-z][a-z0-9_]{0,63}$'),
  project_canonical_id text,
  session_id text,
  effect text NOT NULL CHECK (effect ~ '^[a-z][a-z0-9_]{0,63}$'),
  outcome text NOT NULL CHECK (outcome IN ('success', 'failure')),
  reason_code text CHECK (reason_code ~ '^[a-z][a-z0-9_]{0,63}$'),
  failure_stage text CHECK (failure_stage ~ '^[a-z][a-z0-9_]{0,63}$'),
  state_changed boolean NOT NULL,
  outcome_unknown boolean NOT NULL,
  duration_us integer NOT NULL CHECK (duration_us >= 0),
  stage_durations_us jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(stage_durations_us) = 'object'),
  args_shape_fingerprint text CHECK (args_shape_fingerprint ~ '^[0-9a-f]{16}$'),
  args_shape_leaves text[] CHECK (cardinality(args_shape_leaves) <= 64 AND array_to_string(args_shape_leaves, ',') ~ '^([0-9a-f]{12}(,[0-9a-f]{12})*)?$'),
  result_canonical_bytes integer CHECK (result_canonical_bytes >= 0),
  result_projected_bytes integer CHECK (result_projected_bytes >= 0),
  result_metadata_bytes integer CHECK (result_metadata_bytes >= 0),
  -- summary.model_ergonomics (v13): {version, input_normalization_code?}; the code only on
  -- success. Which codes are known is checked by the service against libs/contracts (one owner).
  summary jsonb NOT NULL CHECK (jsonb_typeof(summary) = 'object'),
  CHECK (outcome = 'success' OR summary #> '{model_ergonomics,input_normalization_code}' IS NULL),
  CHECK ((summary #>> '{model_ergonomics,input_normalization_code}') IS NULL
    OR (summary #>> '{model_ergonomics,input_normalization_code}') ~ '^[a-z][a-z0-9_]{0,63}$'),
  PRIMARY KEY (call_id, started_at)
) PARTITION BY RANGE (started_at);
CREATE INDEX action_audit_by_tenant_time ON {{schema}}.action_audit (client_id, started_at DESC);
CREATE TRIGGER action_audit_append_only BEFORE UPDATE OR DELETE ON {{schema}}.action_audit
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.action_audit_append_only();
CREATE TRIGGER action_audit_no_truncate BEFORE TRUNCATE ON {{schema}}.action_audit
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.action_audit_append_only();
`,
  },
];
