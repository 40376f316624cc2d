/** How the embedded Postgres is opened, shared by the init child and the serving worker. */
import type { PGliteOptions } from "@electric-sql/pglite";

// A development database: small shared buffers keep the process small (PGlite's default
// reserves ~130 MB more; 16 MB kept ~20 MiB more resident than 8 MB at idle) and make forking
// Runner processes cheaper. One developer's refs, sessions and audit rows fit in them.
export const pgliteOptions = (dataDir: string): PGliteOptions => ({ dataDir, postgresqlconf: "shared_buffers = 8MB\n" });
