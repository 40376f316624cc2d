/** How the embedded Postgres is opened, shared by the init child and the serving worker. */
import type { PGliteOptions } from "@electric-sql/pglite";

// A development database: small shared buffers keep the process small (PGlite's default
// reserves ~130 MB more) and make forking Runner processes cheaper.
export const pgliteOptions = (dataDir: string): PGliteOptions => ({ dataDir, postgresqlconf: "shared_buffers = 16MB\n" });
