/** The ref-resolver's schema migrations (schema `refs`). */
import type { Migration } from "@webcodex/platform";
import { AGENTS_SQL } from "./schema/agents.js";
import { PROJECTS_SQL } from "./schema/projects.js";
import { SESSIONS_SQL } from "./schema/sessions.js";

/**
 * The baseline: Projects and their refs, Sessions, Agents (in that order: each part refers to the
 * ones before it). Once a release ships, its migrations are never edited: changes are new
 * migrations appended here.
 */
export const refResolverMigrations: readonly Migration[] = [{ id: "0001_baseline", sql: [PROJECTS_SQL, SESSIONS_SQL, AGENTS_SQL].join("\n") }];
