/**
 * Workflow Sessions: the Session, its refs, the bounded append-only record of calls made with
 * session_id (facts, never arguments or content), recovered writes, and goal plans.
 */
export const SESSIONS_SQL = `
-- ── Workflow Sessions ──
CREATE TABLE {{schema}}.sessions (
  session_id text PRIMARY KEY CHECK (session_id ~ '^wc_sess_[0-9a-f]{32}$'),
  client_id text NOT NULL,
  subject text NOT NULL,
  project_canonical_id text NOT NULL,
  project_incarnation bigint NOT NULL,
  title text NOT NULL DEFAULT '' CHECK (char_length(title) <= 200),
  state text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
  created_at timestamptz NOT NULL DEFAULT now(),
  last_activity_at timestamptz NOT NULL DEFAULT now(),
  closed_at timestamptz,
  calls_recorded bigint NOT NULL DEFAULT 0 CHECK (calls_recorded >= 0),
  calls_dropped bigint NOT NULL DEFAULT 0 CHECK (calls_dropped >= 0),
  CHECK ((state = 'closed') = (closed_at IS NOT NULL)),
  UNIQUE (session_id, client_id, subject),
  FOREIGN KEY (project_canonical_id, project_incarnation) REFERENCES {{schema}}.projects (canonical_id, incarnation)
);
CREATE FUNCTION {{schema}}.sessions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'sessions are closed, never deleted';
  END IF;
  IF (NEW.session_id, NEW.client_id, NEW.subject, NEW.project_canonical_id, NEW.project_incarnation, NEW.created_at)
     IS DISTINCT FROM (OLD.session_id, OLD.client_id, OLD.subject, OLD.project_canonical_id, OLD.project_incarnation, OLD.created_at) THEN
    RAISE EXCEPTION 'a session never changes identity, owner or project';
  END IF;
  IF OLD.state = 'closed' AND NEW.state <> 'closed' THEN
    RAISE EXCEPTION 'a closed session stays closed';
  END IF;
  IF NEW.calls_recorded < OLD.calls_recorded OR NEW.calls_dropped < OLD.calls_dropped THEN
    RAISE EXCEPTION 'session call counters never go backwards';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER sessions_guard BEFORE UPDATE OR DELETE ON {{schema}}.sessions
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.sessions_guard();
CREATE TRIGGER sessions_no_truncate BEFORE TRUNCATE ON {{schema}}.sessions
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

-- A session_ref names one Session for its owner only (the FK includes the owner).
CREATE TABLE {{schema}}.session_refs (
  client_id text NOT NULL,
  subject text NOT NULL,
  code bigint NOT NULL CHECK (code > 0),
  session_id text NOT NULL,
  issued_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, subject, code),
  UNIQUE (client_id, subject, session_id),
  FOREIGN KEY (session_id, client_id, subject) REFERENCES {{schema}}.sessions (session_id, client_id, subject)
);
CREATE TRIGGER session_refs_immutable BEFORE UPDATE OR DELETE ON {{schema}}.session_refs
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.append_only();
CREATE TRIGGER session_refs_no_truncate BEFORE TRUNCATE ON {{schema}}.session_refs
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

-- The bounded, append-only record of calls made with session_id: facts, never arguments,
-- commands, paths or content.
CREATE TABLE {{schema}}.session_calls (
  session_id text NOT NULL REFERENCES {{schema}}.sessions (session_id),
  seq bigint NOT NULL CHECK (seq > 0),
  call_id text NOT NULL CHECK (char_length(call_id) BETWEEN 1 AND 128),
  tool text NOT NULL CHECK (tool ~ '^[a-z][a-z0-9_]{0,63}$'),
  effect text NOT NULL CHECK (effect IN ('read_only', 'workspace_write', 'process_execution', 'durable_state', 'presentation')),
  outcome text NOT NULL CHECK (outcome IN ('success', 'failure', 'pending', 'unknown')),
  reason_code text CHECK (reason_code ~ '^[a-z][a-z0-9_]{0,63}$'),
  detail_code text CHECK (detail_code ~ '^[a-z0-9][a-z0-9_.:-]{0,63}$'),
  paths_count integer NOT NULL DEFAULT 0 CHECK (paths_count >= 0),
  changed_paths_count integer NOT NULL DEFAULT 0 CHECK (changed_paths_count >= 0),
  job_id text CHECK (char_length(job_id) BETWEEN 1 AND 128),
  job_state text CHECK (job_state IN ('pending', 'terminal')),
  duration_ms integer NOT NULL DEFAULT 0 CHECK (duration_ms >= 0),
  recorded_at timestamptz NOT NULL DEFAULT now(),
  -- A validation result's verdict and counts on the call that gave it (never output text).
  validation_status text CHECK (validation_status IN ('passed', 'failed', 'error', 'unparsed')),
  validation_tests_passed integer CHECK (validation_tests_passed >= 0),
  validation_tests_failed integer CHECK (validation_tests_failed >= 0),
  validation_tests_skipped integer CHECK (validation_tests_skipped >= 0),
  validation_errors integer CHECK (validation_errors >= 0),
  validation_warnings integer CHECK (validation_warnings >= 0),
  -- What a handoff lets a fresh turn resume from: the paths a call read or changed with their
  -- read_revision (never content), a run's command summary and exit code.
  paths jsonb CHECK (paths IS NULL OR (jsonb_typeof(paths) = 'array' AND jsonb_array_length(paths) <= 64)),
  command_summary text CHECK (char_length(command_summary) <= 200),
  exit_code integer,
  -- The run_code_cell a call was made in (its call id); NULL for a call made directly.
  parent_call_id text CHECK (char_length(parent_call_id) BETWEEN 1 AND 128),
  PRIMARY KEY (session_id, seq),
  UNIQUE (session_id, call_id),
  CHECK ((job_id IS NULL) = (job_state IS NULL)),
  CONSTRAINT session_calls_validation_complete CHECK (
    (validation_status IS NULL) = (validation_tests_passed IS NULL) AND (validation_status IS NULL) = (validation_tests_failed IS NULL)
    AND (validation_status IS NULL) = (validation_tests_skipped IS NULL) AND (validation_status IS NULL) = (validation_errors IS NULL)
    AND (validation_status IS NULL) = (validation_warnings IS NULL))
);
CREATE INDEX session_calls_jobs ON {{schema}}.session_calls (session_id, job_id, seq) WHERE job_id IS NOT NULL;
CREATE INDEX session_calls_validations ON {{schema}}.session_calls (session_id, seq) WHERE validation_status IS NOT NULL;
CREATE TRIGGER session_calls_append_only BEFORE UPDATE OR DELETE ON {{schema}}.session_calls
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.append_only();


-- How a Runner's start-up recovery finished each write transaction cut off when the Runner
-- died, under the call id the interrupted call was given: what a Session's handoff shows for
-- a call recorded with an unknown outcome. One row per interrupted transaction; a Runner
-- reports the same ones at each registration, so the first report is kept.
CREATE TABLE {{schema}}.recovered_writes (
  project_canonical_id text NOT NULL,
  call_id text NOT NULL CHECK (char_length(call_id) BETWEEN 1 AND 128),
  tool text NOT NULL CHECK (tool ~ '^[a-z][a-z0-9_]{0,63}$'),
  outcome text NOT NULL CHECK (outcome IN ('rolled_back', 'completed')),
  recorded_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_canonical_id, call_id)
);

-- present_goal_plan snapshots: one row per (principal, Project or '', goal), revised in place.
CREATE TABLE {{schema}}.goal_plans (
  plan_id text PRIMARY KEY,
  client_id text NOT NULL,
  subject text NOT NULL,
  project_canonical_id text NOT NULL,
  goal text NOT NULL,
  steps jsonb NOT NULL,
  revision bigint NOT NULL DEFAULT 1 CHECK (revision > 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);
`;
