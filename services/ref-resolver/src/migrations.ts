import type { Migration } from "@webcodex/platform";

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
];
