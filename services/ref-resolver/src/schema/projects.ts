/**
 * The ref-resolver's Projects: incarnations, project_refs and the per-principal ref counters,
 * owners and visibility, hiding, use order, and the resolution functions on the hot path. The
 * guards every identity table uses are defined here first: refs are immutable (PK on principal
 * + code), counters only advance and are never deleted, pinned identities are never deleted,
 * identity tables refuse TRUNCATE.
 */
export const PROJECTS_SQL = `
-- ── guards shared by every identity table ──
CREATE FUNCTION {{schema}}.append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'rows of %.% are never rewritten or deleted', TG_TABLE_SCHEMA, TG_TABLE_NAME;
END $$;
CREATE FUNCTION {{schema}}.refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '%.% is never truncated', TG_TABLE_SCHEMA, TG_TABLE_NAME;
END $$;


-- ── Projects, their refs and the per-principal ref counters ──
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
  PRIMARY KEY (client_id, subject, kind),
  CONSTRAINT ref_counters_kind_known CHECK (kind IN ('project', 'session', 'agent_continuation', 'attempt')),
  CONSTRAINT ref_counters_nonnegative CHECK (last_code >= 0)
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

-- Counters: known kinds only; they only advance and are never deleted.
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

-- Who owns a Project address and who in its tenant may see it: one row per canonical address,
-- kept across incarnations. An address with no row is shared with its tenant, with no owner.
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

-- The hot resolution reads, as functions so Postgres caches their plans per connection
-- (planning the join costs more than running it). Each probes full unique keys only.
-- resolve_project_ref: the pin of (principal, code), the live incarnation of its address (if
-- any), whether that address is hidden from the principal, its owner and visibility; no row =
-- never issued. resolve_live_project: the same for the live incarnation of a canonical address;
-- no row = no live incarnation.
CREATE FUNCTION {{schema}}.resolve_project_ref(p_client text, p_subject text, p_code bigint)
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

CREATE FUNCTION {{schema}}.resolve_live_project(p_canonical text, p_client text, p_subject text)
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
`;
