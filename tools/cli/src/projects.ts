/**
 * `webcodex projects list`: every Project the store holds, for operators. The model's
 * list_projects shows what its caller may use; in embedded mode it leaves out the Projects of
 * earlier runs that no Runner in that process can serve. This command still shows them.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createPgliteDatabase, createPostgresDatabase } from "@webcodex/platform";
import type { Database } from "@webcodex/platform";
import { listStoredProjects } from "@webcodex/ref-resolver";
import type { StoredProject } from "@webcodex/ref-resolver";
import { UsageError } from "./args.js";
import { PROJECTS_USAGE } from "./usage.js";

export interface ProjectsIo {
  env: NodeJS.ProcessEnv;
  write(text: string): void;
  /** The embedded data dir used when neither flag nor env names a store. */
  defaultDataDir: string;
  /** Takes the data dir's one-process lock (refusing while a webcodex stdio holds it); returns its release. */
  lockDataDir?: (dir: string) => () => void;
}

function renderTable(projects: readonly StoredProject[]): string {
  const rows = [
    ["PROJECT", "NAME", "INCARNATION", "CREATED", "RETIRED"],
    ...projects.map((p) => [p.canonical_id, p.name, String(p.incarnation), p.created_at, p.retired_at ?? "-"]),
  ];
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  return (
    rows
      .map((r) =>
        r
          .map((c, i) => c.padEnd(widths[i] ?? 0))
          .join("  ")
          .trimEnd(),
      )
      .join("\n") + "\n"
  );
}

/** Runs `webcodex projects <subcommand>`; returns what it listed. */
export async function runProjects(argv: readonly string[], io: ProjectsIo): Promise<StoredProject[]> {
  const [sub, ...rest] = argv;
  if (sub !== "list") throw new UsageError(`projects needs the subcommand list, got ${JSON.stringify(sub ?? "")}\n${PROJECTS_USAGE}`);
  const { values } = parseArgs({
    args: rest,
    options: {
      "data-dir": { type: "string" },
      "postgres-url": { type: "string" },
      all: { type: "boolean", default: false },
      format: { type: "string", default: "table" },
    },
  });
  if (values.format !== "table" && values.format !== "json") throw new UsageError(`--format must be table or json, got ${JSON.stringify(values.format)}`);
  if (values["data-dir"] !== undefined && values["postgres-url"] !== undefined) throw new UsageError("give --data-dir or --postgres-url, not both");
  const url = values["postgres-url"] ?? (values["data-dir"] === undefined ? io.env["WEBCODEX_POSTGRES_URL"] : undefined);
  let db: Database;
  let unlock = () => {};
  if (url) db = createPostgresDatabase({ url, max: 1 });
  else {
    const dir = values["data-dir"] ?? io.env["WEBCODEX_DATA_DIR"] ?? io.defaultDataDir;
    // Never create a store only to list nothing from it.
    if (!existsSync(join(dir, "postgres"))) throw new Error(`no embedded data in ${dir} (webcodex dev --data-dir ${dir} creates it)`);
    unlock = io.lockDataDir?.(dir) ?? unlock;
    try {
      db = await createPgliteDatabase(join(dir, "postgres"));
    } catch (error) {
      unlock();
      throw error;
    }
  }
  try {
    const projects = await listStoredProjects(db, { includeRetired: values.all });
    io.write(values.format === "json" ? `${JSON.stringify({ projects })}\n` : renderTable(projects));
    return projects;
  } finally {
    await db.close();
    unlock();
  }
}
