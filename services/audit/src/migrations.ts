import type { Migration } from "@webcodex/platform";

/** The audit service owns schema `audit`. ActionAudit is append-only. */
export const auditMigrations: readonly Migration[] = [
  {
    id: "0001_action_audit",
    sql: `
CREATE TABLE {{schema}}.action_audit (
  call_id text PRIMARY KEY,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  client_id text NOT NULL,
  subject text NOT NULL,
  tool text NOT NULL,
  project_canonical_id text,
  session_id text,
  effect text NOT NULL,
  outcome text NOT NULL CHECK (outcome IN ('success', 'failure')),
  reason_code text,
  state_changed boolean NOT NULL,
  outcome_unknown boolean NOT NULL,
  input_normalization_code text,
  started_at timestamptz NOT NULL,
  duration_us integer NOT NULL,
  stage_durations_us jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX action_audit_by_tenant_time ON {{schema}}.action_audit (client_id, started_at DESC);
CREATE FUNCTION {{schema}}.action_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'action_audit is append-only';
END $$;
CREATE TRIGGER action_audit_append_only BEFORE UPDATE OR DELETE ON {{schema}}.action_audit
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.action_audit_append_only();
`,
  },
];
