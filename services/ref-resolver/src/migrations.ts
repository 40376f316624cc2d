/** The ref-resolver's schema migrations. One concept over 400 lines: the migration list, append-only. */
import type { Migration } from "@webcodex/platform";

/**
 * 0002: the other three ref kinds, Workflow Sessions, agent Endpoints and Attempts, per-subject
 * Project visibility, and the guards that make recycling impossible rather than unlikely:
 * every ref row is immutable (PK on principal + code), counters only advance and are never
 * deleted, pinned identities are never deleted, identity tables refuse TRUNCATE, and each
 * generation / fence only moves forward.
 */
const MIGRATION_0002 = `
-- ── guards shared by every identity table ──
CREATE FUNCTION {{schema}}.append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'rows of %.% are never rewritten or deleted', TG_TABLE_SCHEMA, TG_TABLE_NAME;
END $$;
CREATE FUNCTION {{schema}}.refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '%.% is never truncated', TG_TABLE_SCHEMA, TG_TABLE_NAME;
END $$;

-- ── counters: known kinds only; they only advance and are never deleted ──
ALTER TABLE {{schema}}.ref_counters
  ADD CONSTRAINT ref_counters_kind_known CHECK (kind IN ('project', 'session', 'agent_continuation', 'attempt')),
  ADD CONSTRAINT ref_counters_nonnegative CHECK (last_code >= 0);
CREATE FUNCTION {{schema}}.ref_counters_only_advance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'ref counters are never deleted';
  END IF;
  IF (NEW.client_id, NEW.subject, NEW.kind) IS DISTINCT FROM (OLD.client_id, OLD.subject, OLD.kind) THEN
    RAISE EXCEPTION 'ref counters are never re-keyed';
  END IF;
  IF NEW.last_code < OLD.last_code THEN
    RAISE EXCEPTION 'ref counters never go backwards';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER ref_counters_only_advance BEFORE UPDATE OR DELETE ON {{schema}}.ref_counters
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.ref_counters_only_advance();
CREATE TRIGGER ref_counters_no_truncate BEFORE TRUNCATE ON {{schema}}.ref_counters
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();
CREATE TRIGGER project_refs_no_truncate BEFORE TRUNCATE ON {{schema}}.project_refs
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

-- Locks the (principal, kind) counter row, creating it at 0 on first use, and returns the
-- last issued code. Every issuer takes this lock before it looks for an existing ref and
-- before it inserts, so codes are consecutive per principal and kind and never reissued.
CREATE FUNCTION {{schema}}.lock_ref_counter(p_client text, p_subject text, p_kind text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_last bigint;
BEGIN
  SELECT c.last_code INTO v_last FROM {{schema}}.ref_counters c
    WHERE c.client_id = p_client AND c.subject = p_subject AND c.kind = p_kind FOR UPDATE;
  IF FOUND THEN
    RETURN v_last;
  END IF;
  INSERT INTO {{schema}}.ref_counters (client_id, subject, kind, last_code) VALUES (p_client, p_subject, p_kind, 0)
    ON CONFLICT (client_id, subject, kind) DO NOTHING;
  SELECT c.last_code INTO STRICT v_last FROM {{schema}}.ref_counters c
    WHERE c.client_id = p_client AND c.subject = p_subject AND c.kind = p_kind FOR UPDATE;
  RETURN v_last;
END $$;

-- ── projects: never deleted; identity immutable; retirement is final ──
CREATE FUNCTION {{schema}}.projects_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'projects are retired, never deleted';
  END IF;
  IF (NEW.canonical_id, NEW.incarnation, NEW.client_id, NEW.project_id, NEW.root_identity)
     IS DISTINCT FROM (OLD.canonical_id, OLD.incarnation, OLD.client_id, OLD.project_id, OLD.root_identity) THEN
    RAISE EXCEPTION 'a project incarnation never changes identity';
  END IF;
  IF OLD.retired_at IS NOT NULL AND NEW.retired_at IS DISTINCT FROM OLD.retired_at THEN
    RAISE EXCEPTION 'a retired project incarnation stays retired';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER projects_guard BEFORE UPDATE OR DELETE ON {{schema}}.projects
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.projects_guard();
CREATE TRIGGER projects_no_truncate BEFORE TRUNCATE ON {{schema}}.projects
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

-- A Project hidden from one subject of its client: not listed, refs and selectors fail closed.
CREATE TABLE {{schema}}.hidden_projects (
  canonical_id text NOT NULL,
  client_id text NOT NULL,
  subject text NOT NULL,
  hidden_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (canonical_id, client_id, subject)
);

-- The hot resolution reads, as functions so Postgres caches their plans per connection
-- (planning the join costs more than running it). Each probes full unique keys only.
-- resolve_project_ref: the pin of (principal, code), the live incarnation of its address
-- (if any) and whether that address is hidden from the principal; no row = never issued.
CREATE FUNCTION {{schema}}.resolve_project_ref(p_client text, p_subject text, p_code bigint)
RETURNS TABLE (pin_canonical_id text, pin_incarnation bigint, live_incarnation bigint, live_client_id text, live_project_id text,
               live_root_identity text, live_name text, hidden boolean)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
    SELECT r.canonical_id, r.incarnation, p.incarnation, p.client_id, p.project_id, p.root_identity, p.name,
           EXISTS (SELECT 1 FROM {{schema}}.hidden_projects h
                   WHERE h.canonical_id = r.canonical_id AND h.client_id = r.client_id AND h.subject = r.subject)
    FROM {{schema}}.project_refs r
    LEFT JOIN {{schema}}.projects p ON p.canonical_id = r.canonical_id AND p.retired_at IS NULL
    WHERE r.client_id = p_client AND r.subject = p_subject AND r.code = p_code;
END $$;
-- resolve_live_project: the live incarnation of a canonical address and whether it is hidden
-- from the principal; no row = no live incarnation.
CREATE FUNCTION {{schema}}.resolve_live_project(p_canonical text, p_client text, p_subject text)
RETURNS TABLE (live_incarnation bigint, live_client_id text, live_project_id text, live_root_identity text, live_name text, hidden boolean)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
    SELECT p.incarnation, p.client_id, p.project_id, p.root_identity, p.name,
           EXISTS (SELECT 1 FROM {{schema}}.hidden_projects h
                   WHERE h.canonical_id = p.canonical_id AND h.client_id = p_client AND h.subject = p_subject)
    FROM {{schema}}.projects p
    WHERE p.canonical_id = p_canonical AND p.retired_at IS NULL;
END $$;

-- Issues (or returns) the project_refs of the given incarnations for one principal in one
-- call: already-issued refs are returned without taking the counter lock; missing ones get
-- consecutive codes under it. Each lookup is a scalar subquery on the full unique key, so
-- its plan is one index probe per target whatever the table statistics say.
CREATE FUNCTION {{schema}}.issue_project_refs(p_client text, p_subject text, p_canonical text[], p_incarnation bigint[])
RETURNS TABLE (out_canonical_id text, out_incarnation bigint, out_code bigint) LANGUAGE plpgsql AS $$
DECLARE
  v_last bigint;
  v_added bigint;
BEGIN
  IF EXISTS (
    SELECT 1 FROM unnest(p_canonical, p_incarnation) AS t(c, i)
    WHERE (SELECT r.code FROM {{schema}}.project_refs r
           WHERE r.client_id = p_client AND r.subject = p_subject AND r.canonical_id = t.c AND r.incarnation = t.i) IS NULL
  ) THEN
    v_last := {{schema}}.lock_ref_counter(p_client, p_subject, 'project');
    INSERT INTO {{schema}}.project_refs (client_id, subject, code, canonical_id, incarnation)
      SELECT p_client, p_subject, v_last + row_number() OVER (ORDER BY m.ord), m.c, m.i
      FROM (
        SELECT DISTINCT ON (t.c, t.i) t.c, t.i, t.ord
        FROM unnest(p_canonical, p_incarnation) WITH ORDINALITY AS t(c, i, ord)
        WHERE (SELECT r.code FROM {{schema}}.project_refs r
               WHERE r.client_id = p_client AND r.subject = p_subject AND r.canonical_id = t.c AND r.incarnation = t.i) IS NULL
        ORDER BY t.c, t.i, t.ord
      ) AS m;
    GET DIAGNOSTICS v_added = ROW_COUNT;
    IF v_added > 0 THEN
      UPDATE {{schema}}.ref_counters SET last_code = v_last + v_added
        WHERE client_id = p_client AND subject = p_subject AND kind = 'project';
    END IF;
  END IF;
  RETURN QUERY
    SELECT w.c, w.i,
           (SELECT r.code FROM {{schema}}.project_refs r
            WHERE r.client_id = p_client AND r.subject = p_subject AND r.canonical_id = w.c AND r.incarnation = w.i)
    FROM (SELECT DISTINCT t.c, t.i FROM unnest(p_canonical, p_incarnation) AS t(c, i)) AS w;
END $$;

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
  outcome text NOT NULL CHECK (outcome IN ('ok', 'failed', 'pending', 'unknown')),
  reason_code text CHECK (reason_code ~ '^[a-z][a-z0-9_]{0,63}$'),
  detail_code text CHECK (detail_code ~ '^[a-z0-9][a-z0-9_.:-]{0,63}$'),
  paths_count integer NOT NULL DEFAULT 0 CHECK (paths_count >= 0),
  changed_paths_count integer NOT NULL DEFAULT 0 CHECK (changed_paths_count >= 0),
  job_id text CHECK (char_length(job_id) BETWEEN 1 AND 128),
  job_state text CHECK (job_state IN ('pending', 'terminal')),
  duration_ms integer NOT NULL DEFAULT 0 CHECK (duration_ms >= 0),
  recorded_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (session_id, seq),
  UNIQUE (session_id, call_id),
  CHECK ((job_id IS NULL) = (job_state IS NULL))
);
CREATE INDEX session_calls_jobs ON {{schema}}.session_calls (session_id, job_id, seq) WHERE job_id IS NOT NULL;
CREATE TRIGGER session_calls_append_only BEFORE UPDATE OR DELETE ON {{schema}}.session_calls
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.append_only();

-- ── agent continuation Endpoints and their refs ──
CREATE TABLE {{schema}}.agent_endpoints (
  client_id text NOT NULL,
  subject text NOT NULL,
  agent_id text NOT NULL,
  endpoint_id text NOT NULL,
  controller_generation bigint NOT NULL CHECK (controller_generation > 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  rotated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, subject, agent_id, endpoint_id)
);
CREATE FUNCTION {{schema}}.generation_only_advances() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'rows of %.% are never deleted', TG_TABLE_SCHEMA, TG_TABLE_NAME;
  END IF;
  IF NEW.controller_generation <= OLD.controller_generation THEN
    RAISE EXCEPTION 'a controller generation only advances';
  END IF;
  RETURN NEW;
END $$;
CREATE FUNCTION {{schema}}.agent_endpoints_identity() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.client_id, NEW.subject, NEW.agent_id, NEW.endpoint_id) IS DISTINCT FROM (OLD.client_id, OLD.subject, OLD.agent_id, OLD.endpoint_id) THEN
    RAISE EXCEPTION 'an endpoint never changes identity';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agent_endpoints_generation BEFORE UPDATE OR DELETE ON {{schema}}.agent_endpoints
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.generation_only_advances();
CREATE TRIGGER agent_endpoints_identity BEFORE UPDATE ON {{schema}}.agent_endpoints
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.agent_endpoints_identity();
CREATE TRIGGER agent_endpoints_no_truncate BEFORE TRUNCATE ON {{schema}}.agent_endpoints
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

CREATE TABLE {{schema}}.agent_continuation_refs (
  client_id text NOT NULL,
  subject text NOT NULL,
  code bigint NOT NULL CHECK (code > 0),
  agent_id text NOT NULL,
  endpoint_id text NOT NULL,
  controller_generation bigint NOT NULL CHECK (controller_generation > 0),
  issued_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, subject, code),
  UNIQUE (client_id, subject, agent_id, endpoint_id, controller_generation),
  FOREIGN KEY (client_id, subject, agent_id, endpoint_id) REFERENCES {{schema}}.agent_endpoints (client_id, subject, agent_id, endpoint_id)
);
CREATE TRIGGER agent_continuation_refs_immutable BEFORE UPDATE OR DELETE ON {{schema}}.agent_continuation_refs
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.append_only();
CREATE TRIGGER agent_continuation_refs_no_truncate BEFORE TRUNCATE ON {{schema}}.agent_continuation_refs
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

-- ── agent Tasks, fenced Attempts and their refs ──
CREATE TABLE {{schema}}.agent_tasks (
  client_id text NOT NULL,
  subject text NOT NULL,
  task_id text NOT NULL,
  current_fence bigint NOT NULL CHECK (current_fence > 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, subject, task_id)
);
CREATE FUNCTION {{schema}}.agent_tasks_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'agent tasks are never deleted';
  END IF;
  IF (NEW.client_id, NEW.subject, NEW.task_id) IS DISTINCT FROM (OLD.client_id, OLD.subject, OLD.task_id) THEN
    RAISE EXCEPTION 'a task never changes identity';
  END IF;
  IF NEW.current_fence <= OLD.current_fence THEN
    RAISE EXCEPTION 'an attempt fence only advances';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agent_tasks_guard BEFORE UPDATE OR DELETE ON {{schema}}.agent_tasks
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.agent_tasks_guard();
CREATE TRIGGER agent_tasks_no_truncate BEFORE TRUNCATE ON {{schema}}.agent_tasks
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

CREATE TABLE {{schema}}.agent_task_attempts (
  attempt_id text PRIMARY KEY CHECK (attempt_id ~ '^wc_att_[0-9a-f]{32}$'),
  client_id text NOT NULL,
  subject text NOT NULL,
  task_id text NOT NULL,
  assignee_agent_id text NOT NULL,
  attempt_fence bigint NOT NULL CHECK (attempt_fence > 0),
  controller_generation bigint NOT NULL CHECK (controller_generation > 0),
  idempotency_key text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (client_id, subject, task_id, attempt_fence),
  UNIQUE (client_id, subject, task_id, idempotency_key),
  UNIQUE (attempt_id, client_id, subject, task_id, assignee_agent_id, attempt_fence),
  FOREIGN KEY (client_id, subject, task_id) REFERENCES {{schema}}.agent_tasks (client_id, subject, task_id)
);
CREATE FUNCTION {{schema}}.agent_task_attempts_identity() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.attempt_id, NEW.client_id, NEW.subject, NEW.task_id, NEW.assignee_agent_id, NEW.attempt_fence, NEW.idempotency_key, NEW.created_at)
     IS DISTINCT FROM (OLD.attempt_id, OLD.client_id, OLD.subject, OLD.task_id, OLD.assignee_agent_id, OLD.attempt_fence, OLD.idempotency_key, OLD.created_at) THEN
    RAISE EXCEPTION 'an attempt never changes identity or fence';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agent_task_attempts_generation BEFORE UPDATE OR DELETE ON {{schema}}.agent_task_attempts
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.generation_only_advances();
CREATE TRIGGER agent_task_attempts_identity BEFORE UPDATE ON {{schema}}.agent_task_attempts
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.agent_task_attempts_identity();
CREATE TRIGGER agent_task_attempts_no_truncate BEFORE TRUNCATE ON {{schema}}.agent_task_attempts
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

-- The stored tuple must be the Attempt's own immutable identity (composite FK), for its owner.
CREATE TABLE {{schema}}.attempt_refs (
  client_id text NOT NULL,
  subject text NOT NULL,
  code bigint NOT NULL CHECK (code > 0),
  task_id text NOT NULL,
  attempt_id text NOT NULL,
  assignee_agent_id text NOT NULL,
  attempt_fence bigint NOT NULL CHECK (attempt_fence > 0),
  controller_generation bigint NOT NULL CHECK (controller_generation > 0),
  issued_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, subject, code),
  UNIQUE (client_id, subject, attempt_id, controller_generation),
  FOREIGN KEY (attempt_id, client_id, subject, task_id, assignee_agent_id, attempt_fence)
    REFERENCES {{schema}}.agent_task_attempts (attempt_id, client_id, subject, task_id, assignee_agent_id, attempt_fence)
);
CREATE TRIGGER attempt_refs_immutable BEFORE UPDATE OR DELETE ON {{schema}}.attempt_refs
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.append_only();
CREATE TRIGGER attempt_refs_no_truncate BEFORE TRUNCATE ON {{schema}}.attempt_refs
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();
`;

/**
 * 0003: Agents, Tasks, fenced Attempts, per-agent event logs and keyed replays. The earlier
 * principal-local attempt tables (never reachable from a tool) are replaced: a Task is created
 * by one principal and worked by the owner of its assignee Agent, so it is keyed by its own id.
 * Constraints make a second live Attempt per Task, a reused fence, a rewritten ref or a
 * rewritten event impossible rather than unlikely.
 */
const MIGRATION_0003 = `
DROP TABLE {{schema}}.attempt_refs;
DROP TABLE {{schema}}.agent_task_attempts;
DROP TABLE {{schema}}.agent_tasks;
DROP FUNCTION {{schema}}.agent_task_attempts_identity();
DROP FUNCTION {{schema}}.agent_tasks_guard();

-- ── Agents: a durable worker identity of one principal, with one continuation Endpoint ──
CREATE TABLE {{schema}}.agents (
  agent_id text PRIMARY KEY CHECK (agent_id ~ '^wc_agent_[0-9a-f]{32}$'),
  client_id text NOT NULL,
  subject text NOT NULL,
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
  endpoint_id text NOT NULL CHECK (endpoint_id ~ '^wc_ep_[0-9a-f]{32}$'),
  last_event_seq bigint NOT NULL DEFAULT 0 CHECK (last_event_seq >= 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (agent_id, client_id),
  FOREIGN KEY (client_id, subject, agent_id, endpoint_id) REFERENCES {{schema}}.agent_endpoints (client_id, subject, agent_id, endpoint_id)
);
CREATE FUNCTION {{schema}}.agents_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'agents are never deleted';
  END IF;
  IF (NEW.agent_id, NEW.client_id, NEW.subject, NEW.name, NEW.endpoint_id, NEW.created_at)
     IS DISTINCT FROM (OLD.agent_id, OLD.client_id, OLD.subject, OLD.name, OLD.endpoint_id, OLD.created_at) THEN
    RAISE EXCEPTION 'an agent never changes identity or owner';
  END IF;
  IF NEW.last_event_seq < OLD.last_event_seq THEN
    RAISE EXCEPTION 'an event sequence never goes backwards';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agents_guard BEFORE UPDATE OR DELETE ON {{schema}}.agents
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.agents_guard();
CREATE TRIGGER agents_no_truncate BEFORE TRUNCATE ON {{schema}}.agents
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

-- ── Tasks: work in a Project, created by a principal, assigned to an Agent of its tenant ──
CREATE TABLE {{schema}}.agent_tasks (
  task_id text PRIMARY KEY CHECK (task_id ~ '^wc_task_[0-9a-f]{32}$'),
  client_id text NOT NULL,
  creator_subject text NOT NULL,
  project_canonical_id text NOT NULL,
  project_incarnation bigint NOT NULL,
  title text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
  instructions text NOT NULL CHECK (char_length(instructions) <= 20000),
  assignee_agent_id text NOT NULL,
  requester_agent_id text,
  state text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'in_progress', 'completed', 'failed', 'stopped')),
  -- The highest fence ever handed out for this Task (the durable floor under the Redis counter).
  current_fence bigint NOT NULL DEFAULT 0 CHECK (current_fence >= 0),
  summary text CHECK (char_length(summary) <= 4000),
  stop_reason text CHECK (char_length(stop_reason) <= 1000),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (assignee_agent_id, client_id) REFERENCES {{schema}}.agents (agent_id, client_id),
  FOREIGN KEY (requester_agent_id, client_id) REFERENCES {{schema}}.agents (agent_id, client_id),
  FOREIGN KEY (project_canonical_id, project_incarnation) REFERENCES {{schema}}.projects (canonical_id, incarnation)
);
CREATE INDEX agent_tasks_by_assignee ON {{schema}}.agent_tasks (assignee_agent_id, created_at);
CREATE INDEX agent_tasks_by_creator ON {{schema}}.agent_tasks (client_id, creator_subject, created_at);
CREATE FUNCTION {{schema}}.agent_tasks_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'agent tasks are never deleted';
  END IF;
  IF (NEW.task_id, NEW.client_id, NEW.creator_subject, NEW.project_canonical_id, NEW.project_incarnation, NEW.title, NEW.instructions,
      NEW.assignee_agent_id, NEW.requester_agent_id, NEW.created_at)
     IS DISTINCT FROM (OLD.task_id, OLD.client_id, OLD.creator_subject, OLD.project_canonical_id, OLD.project_incarnation, OLD.title, OLD.instructions,
      OLD.assignee_agent_id, OLD.requester_agent_id, OLD.created_at) THEN
    RAISE EXCEPTION 'a task never changes identity, project or assignee';
  END IF;
  IF NEW.current_fence < OLD.current_fence THEN
    RAISE EXCEPTION 'a task fence only rises';
  END IF;
  IF OLD.state IN ('completed', 'failed', 'stopped') AND NEW.state <> OLD.state THEN
    RAISE EXCEPTION 'a finished task stays finished';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agent_tasks_guard BEFORE UPDATE OR DELETE ON {{schema}}.agent_tasks
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.agent_tasks_guard();
CREATE TRIGGER agent_tasks_no_truncate BEFORE TRUNCATE ON {{schema}}.agent_tasks
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

-- ── Attempts: one try at a Task by its assignee's owner, holding a lease and a fence ──
CREATE TABLE {{schema}}.agent_task_attempts (
  attempt_id text PRIMARY KEY CHECK (attempt_id ~ '^wc_att_[0-9a-f]{32}$'),
  task_id text NOT NULL REFERENCES {{schema}}.agent_tasks (task_id),
  client_id text NOT NULL,
  subject text NOT NULL,
  assignee_agent_id text NOT NULL,
  attempt_fence bigint NOT NULL CHECK (attempt_fence > 0),
  controller_generation bigint NOT NULL CHECK (controller_generation > 0),
  state text NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'succeeded', 'failed', 'lost', 'stopped')),
  lease_ms integer NOT NULL CHECK (lease_ms > 0),
  lease_expires_at timestamptz NOT NULL,
  summary text CHECK (char_length(summary) <= 4000),
  created_at timestamptz NOT NULL DEFAULT now(),
  ended_at timestamptz,
  CHECK ((state = 'live') = (ended_at IS NULL)),
  UNIQUE (task_id, attempt_fence),
  UNIQUE (attempt_id, client_id, subject, task_id, assignee_agent_id, attempt_fence, controller_generation),
  FOREIGN KEY (assignee_agent_id, client_id) REFERENCES {{schema}}.agents (agent_id, client_id)
);
-- At most one live Attempt per Task.
CREATE UNIQUE INDEX agent_task_attempts_one_live ON {{schema}}.agent_task_attempts (task_id) WHERE state = 'live';
CREATE FUNCTION {{schema}}.agent_task_attempts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- A new Attempt takes exactly the fence just recorded as the Task's high-water mark, so a
  -- fence is never handed out twice nor below an earlier one.
  IF NEW.attempt_fence IS DISTINCT FROM (SELECT current_fence FROM {{schema}}.agent_tasks WHERE task_id = NEW.task_id) THEN
    RAISE EXCEPTION 'an attempt takes its task''s newly recorded fence';
  END IF;
  IF NEW.state <> 'live' THEN
    RAISE EXCEPTION 'an attempt starts live';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agent_task_attempts_insert BEFORE INSERT ON {{schema}}.agent_task_attempts
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.agent_task_attempts_insert();
CREATE FUNCTION {{schema}}.agent_task_attempts_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'attempts are never deleted';
  END IF;
  IF (NEW.attempt_id, NEW.task_id, NEW.client_id, NEW.subject, NEW.assignee_agent_id, NEW.attempt_fence, NEW.controller_generation, NEW.lease_ms, NEW.created_at)
     IS DISTINCT FROM (OLD.attempt_id, OLD.task_id, OLD.client_id, OLD.subject, OLD.assignee_agent_id, OLD.attempt_fence, OLD.controller_generation, OLD.lease_ms, OLD.created_at) THEN
    RAISE EXCEPTION 'an attempt never changes identity, fence or generation';
  END IF;
  IF OLD.state <> 'live' AND (NEW.state, NEW.ended_at, NEW.lease_expires_at, NEW.summary) IS DISTINCT FROM (OLD.state, OLD.ended_at, OLD.lease_expires_at, OLD.summary) THEN
    RAISE EXCEPTION 'an ended attempt stays as it ended';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agent_task_attempts_guard BEFORE UPDATE OR DELETE ON {{schema}}.agent_task_attempts
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.agent_task_attempts_guard();
CREATE TRIGGER agent_task_attempts_no_truncate BEFORE TRUNCATE ON {{schema}}.agent_task_attempts
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

-- An attempt_ref is pinned to the Attempt's exact identity, fence and generation, for its owner.
CREATE TABLE {{schema}}.attempt_refs (
  client_id text NOT NULL,
  subject text NOT NULL,
  code bigint NOT NULL CHECK (code > 0),
  task_id text NOT NULL,
  attempt_id text NOT NULL,
  assignee_agent_id text NOT NULL,
  attempt_fence bigint NOT NULL CHECK (attempt_fence > 0),
  controller_generation bigint NOT NULL CHECK (controller_generation > 0),
  issued_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, subject, code),
  UNIQUE (client_id, subject, attempt_id),
  FOREIGN KEY (attempt_id, client_id, subject, task_id, assignee_agent_id, attempt_fence, controller_generation)
    REFERENCES {{schema}}.agent_task_attempts (attempt_id, client_id, subject, task_id, assignee_agent_id, attempt_fence, controller_generation)
);
CREATE TRIGGER attempt_refs_immutable BEFORE UPDATE OR DELETE ON {{schema}}.attempt_refs
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.append_only();
CREATE TRIGGER attempt_refs_no_truncate BEFORE TRUNCATE ON {{schema}}.attempt_refs
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

-- ── The append-only event log of each Agent; seq is the exact cursor ──
CREATE TABLE {{schema}}.agent_events (
  agent_id text NOT NULL REFERENCES {{schema}}.agents (agent_id),
  seq bigint NOT NULL CHECK (seq > 0),
  kind text NOT NULL CHECK (kind IN ('task_assigned', 'attempt_started', 'attempt_completed', 'attempt_failed', 'attempt_lost', 'task_stopped', 'continuation_requested')),
  task_id text REFERENCES {{schema}}.agent_tasks (task_id),
  attempt_id text REFERENCES {{schema}}.agent_task_attempts (attempt_id),
  at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, seq)
);
CREATE TRIGGER agent_events_append_only BEFORE UPDATE OR DELETE ON {{schema}}.agent_events
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.append_only();
CREATE TRIGGER agent_events_no_truncate BEFORE TRUNCATE ON {{schema}}.agent_events
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();

-- ── Keyed replay: the first result of an idempotency key, exactly as it was returned ──
CREATE TABLE {{schema}}.agent_replays (
  client_id text NOT NULL,
  subject text NOT NULL,
  tool text NOT NULL CHECK (tool ~ '^[a-z][a-z0-9_]{0,63}$'),
  idempotency_key text NOT NULL CHECK (idempotency_key ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'),
  request_digest text NOT NULL,
  result_json text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, subject, tool, idempotency_key)
);
CREATE TRIGGER agent_replays_append_only BEFORE UPDATE OR DELETE ON {{schema}}.agent_replays
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.append_only();
CREATE TRIGGER agent_replays_no_truncate BEFORE TRUNCATE ON {{schema}}.agent_replays
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();
`;

/**
 * 0006 (expand only): who owns a Project address and who in its tenant may see it. One row per
 * canonical address, kept across incarnations; existing addresses become tenant-visible with
 * no owner, as they were. The 0002 resolution functions stay for replicas still running the
 * previous release; the _v2 ones add the owner and visibility.
 */
const MIGRATION_0006 = `
CREATE TABLE {{schema}}.project_settings (
  canonical_id text PRIMARY KEY,
  client_id text NOT NULL,
  owner_subject text,
  visibility text NOT NULL DEFAULT 'tenant' CHECK (visibility IN ('private', 'tenant')),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (visibility = 'tenant' OR owner_subject IS NOT NULL)
);
CREATE TRIGGER project_settings_no_truncate BEFORE TRUNCATE ON {{schema}}.project_settings
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.refuse_truncate();
INSERT INTO {{schema}}.project_settings (canonical_id, client_id, owner_subject, visibility)
  SELECT DISTINCT ON (canonical_id) canonical_id, client_id, NULL, 'tenant' FROM {{schema}}.projects
  ORDER BY canonical_id, incarnation DESC
  ON CONFLICT (canonical_id) DO NOTHING;

CREATE FUNCTION {{schema}}.resolve_project_ref_v2(p_client text, p_subject text, p_code bigint)
RETURNS TABLE (pin_canonical_id text, pin_incarnation bigint, live_incarnation bigint, live_client_id text, live_project_id text,
               live_root_identity text, live_name text, hidden boolean, owner_subject text, visibility text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
    SELECT r.canonical_id, r.incarnation, p.incarnation, p.client_id, p.project_id, p.root_identity, p.name,
           EXISTS (SELECT 1 FROM {{schema}}.hidden_projects h
                   WHERE h.canonical_id = r.canonical_id AND h.client_id = r.client_id AND h.subject = r.subject),
           s.owner_subject, coalesce(s.visibility, 'tenant')
    FROM {{schema}}.project_refs r
    LEFT JOIN {{schema}}.projects p ON p.canonical_id = r.canonical_id AND p.retired_at IS NULL
    LEFT JOIN {{schema}}.project_settings s ON s.canonical_id = r.canonical_id
    WHERE r.client_id = p_client AND r.subject = p_subject AND r.code = p_code;
END $$;

CREATE FUNCTION {{schema}}.resolve_live_project_v2(p_canonical text, p_client text, p_subject text)
RETURNS TABLE (live_incarnation bigint, live_client_id text, live_project_id text, live_root_identity text, live_name text, hidden boolean,
               owner_subject text, visibility text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
    SELECT p.incarnation, p.client_id, p.project_id, p.root_identity, p.name,
           EXISTS (SELECT 1 FROM {{schema}}.hidden_projects h
                   WHERE h.canonical_id = p.canonical_id AND h.client_id = p_client AND h.subject = p_subject),
           s.owner_subject, coalesce(s.visibility, 'tenant')
    FROM {{schema}}.projects p
    LEFT JOIN {{schema}}.project_settings s ON s.canonical_id = p.canonical_id
    WHERE p.canonical_id = p_canonical AND p.retired_at IS NULL;
END $$;
`;

/** The ref-resolver owns schema `refs`. Never edit a shipped migration; add a new one. */
export const refResolverMigrations: readonly Migration[] = [
  {
    id: "0001_projects_and_project_refs",
    sql: `
CREATE TABLE {{schema}}.projects (
  canonical_id text NOT NULL,
  incarnation bigint NOT NULL CHECK (incarnation > 0),
  client_id text NOT NULL,
  project_id text NOT NULL,
  root_identity text NOT NULL,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  retired_at timestamptz,
  PRIMARY KEY (canonical_id, incarnation)
);
-- At most one live incarnation per canonical address.
CREATE UNIQUE INDEX projects_one_live ON {{schema}}.projects (canonical_id) WHERE retired_at IS NULL;
CREATE INDEX projects_by_client ON {{schema}}.projects (client_id) WHERE retired_at IS NULL;

-- Monotonic per principal and kind; never decremented, so a code is never issued twice.
CREATE TABLE {{schema}}.ref_counters (
  client_id text NOT NULL,
  subject text NOT NULL,
  kind text NOT NULL,
  last_code bigint NOT NULL,
  PRIMARY KEY (client_id, subject, kind)
);

-- A project_ref is pinned to one exact incarnation; rows are never updated or deleted.
CREATE TABLE {{schema}}.project_refs (
  client_id text NOT NULL,
  subject text NOT NULL,
  code bigint NOT NULL CHECK (code > 0),
  canonical_id text NOT NULL,
  incarnation bigint NOT NULL,
  issued_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, subject, code),
  UNIQUE (client_id, subject, canonical_id, incarnation),
  FOREIGN KEY (canonical_id, incarnation) REFERENCES {{schema}}.projects (canonical_id, incarnation)
);
CREATE FUNCTION {{schema}}.refs_are_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'refs are never rewritten or recycled';
END $$;
CREATE TRIGGER project_refs_immutable BEFORE UPDATE OR DELETE ON {{schema}}.project_refs
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.refs_are_immutable();
`,
  },
  {
    id: "0002_refs_sessions_agents",
    sql: MIGRATION_0002,
  },
  {
    id: "0003_agents_tasks_attempts_events",
    sql: MIGRATION_0003,
  },
  {
    // A validation result's verdict and counts on the call that gave it (never output text).
    id: "0004_session_call_validation",
    sql: `
ALTER TABLE {{schema}}.session_calls
  ADD COLUMN validation_status text CHECK (validation_status IN ('passed', 'failed', 'error', 'unparsed')),
  ADD COLUMN validation_tests_passed integer CHECK (validation_tests_passed >= 0),
  ADD COLUMN validation_tests_failed integer CHECK (validation_tests_failed >= 0),
  ADD COLUMN validation_tests_skipped integer CHECK (validation_tests_skipped >= 0),
  ADD COLUMN validation_errors integer CHECK (validation_errors >= 0),
  ADD COLUMN validation_warnings integer CHECK (validation_warnings >= 0),
  ADD CONSTRAINT session_calls_validation_complete CHECK (
    (validation_status IS NULL) = (validation_tests_passed IS NULL) AND (validation_status IS NULL) = (validation_tests_failed IS NULL)
    AND (validation_status IS NULL) = (validation_tests_skipped IS NULL) AND (validation_status IS NULL) = (validation_errors IS NULL)
    AND (validation_status IS NULL) = (validation_warnings IS NULL));
CREATE INDEX session_calls_validations ON {{schema}}.session_calls (session_id, seq) WHERE validation_status IS NOT NULL;
`,
  },
  {
    // What a handoff lets a fresh turn resume from: the paths a call read or changed with
    // their read_revision (never content), a run's command summary and exit code.
    id: "0005_session_call_paths_and_commands",
    sql: `
ALTER TABLE {{schema}}.session_calls
  ADD COLUMN paths jsonb CHECK (paths IS NULL OR (jsonb_typeof(paths) = 'array' AND jsonb_array_length(paths) <= 64)),
  ADD COLUMN command_summary text CHECK (char_length(command_summary) <= 200),
  ADD COLUMN exit_code integer;
`,
  },
  {
    id: "0006_project_owner_and_visibility",
    sql: MIGRATION_0006,
  },
  {
    id: "0007_goal_plans",
    sql: `
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
`,
  },
  {
    id: "0008_agent_continuations",
    sql: `
-- What followed an agent continuation card, as separate observations: one row per (owner,
-- Endpoint generation, cursor the carried wait starts after). The one dispatch is claimed
-- before it is sent and then answered (accepted, rejected, uncertain); nothing moves it back
-- to none, so an uncertain dispatch is never re-sent. The fresh turn and the exact consume
-- (wait_for_agent_events called with that cursor) are later, separate observations.
CREATE TABLE {{schema}}.agent_continuations (
  client_id text NOT NULL,
  subject text NOT NULL,
  agent_id text NOT NULL,
  endpoint_id text NOT NULL,
  controller_generation bigint NOT NULL CHECK (controller_generation > 0),
  after_cursor bigint NOT NULL CHECK (after_cursor >= 0),
  dispatch text NOT NULL DEFAULT 'none' CHECK (dispatch IN ('none', 'claimed', 'accepted', 'rejected', 'uncertain')),
  presented_at timestamptz NOT NULL DEFAULT now(),
  dispatch_at timestamptz,
  fresh_turn_at timestamptz,
  consumed_at timestamptz,
  PRIMARY KEY (client_id, subject, agent_id, endpoint_id, controller_generation, after_cursor),
  CHECK ((dispatch = 'none') = (dispatch_at IS NULL)),
  CHECK (fresh_turn_at IS NULL OR dispatch = 'accepted'),
  CHECK (consumed_at IS NULL OR dispatch <> 'none')
);
CREATE INDEX agent_continuations_awaiting_turn ON {{schema}}.agent_continuations (client_id, subject) WHERE dispatch = 'accepted' AND fresh_turn_at IS NULL;

-- Per owner and Agent, the furthest cursor wait_for_agent_events has delivered events up to:
-- a card's pending events are the ones after it. Only rises.
CREATE TABLE {{schema}}.agent_event_reads (
  client_id text NOT NULL,
  subject text NOT NULL,
  agent_id text NOT NULL,
  delivered_cursor bigint NOT NULL CHECK (delivered_cursor >= 0),
  PRIMARY KEY (client_id, subject, agent_id)
);
`,
  },
  {
    // A Session call's outcome in the platform's one spelling (CallOutcome): ok and failed
    // become success and failure. The table is append-only, so its trigger steps aside for this
    // one rewrite, inside the migration's transaction. A row inserted in the earlier spelling
    // (by a ref-resolver of the previous release, still running while a release rolls out) is
    // stored in the new one, so the table only ever holds CallOutcome values. (Calls from a
    // gateway of the previous release are translated by the service before its checks:
    // receivedOutcome in sessions/session-model.ts.)
    id: "0009_session_call_outcome_vocabulary",
    sql: `
ALTER TABLE {{schema}}.session_calls DROP CONSTRAINT session_calls_outcome_check;
ALTER TABLE {{schema}}.session_calls DISABLE TRIGGER session_calls_append_only;
UPDATE {{schema}}.session_calls SET outcome = CASE outcome WHEN 'ok' THEN 'success' WHEN 'failed' THEN 'failure' ELSE outcome END
  WHERE outcome IN ('ok', 'failed');
ALTER TABLE {{schema}}.session_calls ENABLE TRIGGER session_calls_append_only;
ALTER TABLE {{schema}}.session_calls ADD CONSTRAINT session_calls_outcome_check CHECK (outcome IN ('success', 'failure', 'pending', 'unknown'));
CREATE FUNCTION {{schema}}.session_call_outcome_spelling() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.outcome := CASE NEW.outcome WHEN 'ok' THEN 'success' WHEN 'failed' THEN 'failure' ELSE NEW.outcome END;
  RETURN NEW;
END $$;
CREATE TRIGGER session_calls_outcome_spelling BEFORE INSERT ON {{schema}}.session_calls
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.session_call_outcome_spelling();
`,
  },
  {
    id: "0010_recovered_writes",
    sql: `
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
`,
  },
  {
    // The run_code_cell a call was made in (its call id), so a handoff shows which calls a cell
    // made; NULL for a call made directly and for every row recorded before this release.
    id: "0011_session_call_parent",
    sql: `
ALTER TABLE {{schema}}.session_calls
  ADD COLUMN parent_call_id text CHECK (char_length(parent_call_id) BETWEEN 1 AND 128);
`,
  },
  {
    id: "0012_project_use",
    sql: `
-- When each principal last used each Project in a tool call (list_projects lists the most
-- recently used first). used_at only rises.
CREATE TABLE {{schema}}.project_use (
  client_id text NOT NULL,
  subject text NOT NULL,
  canonical_id text NOT NULL,
  used_at timestamptz NOT NULL,
  PRIMARY KEY (client_id, subject, canonical_id)
);
-- The order a cut list_projects page saw after itself, for its continuation: the rest of the
-- listing is walked in that order even when use order changes meanwhile. Expires (the cursor
-- then fails as cursor_expired).
CREATE TABLE {{schema}}.project_list_snapshots (
  snapshot_id text PRIMARY KEY,
  client_id text NOT NULL,
  subject text NOT NULL,
  name_filter text NOT NULL,
  canonical_ids text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX project_list_snapshots_age ON {{schema}}.project_list_snapshots (created_at);
`,
  },
];
