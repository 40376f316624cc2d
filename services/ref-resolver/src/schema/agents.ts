/**
 * Agents and their work: continuation Endpoints and refs, Agents, Tasks, fenced Attempts and
 * their refs, per-Agent event logs, keyed replays and what followed a continuation card.
 * Constraints make a second live Attempt per Task, a reused fence, a rewritten ref or a
 * rewritten event impossible rather than unlikely.
 */
export const AGENTS_SQL = `
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
`;
