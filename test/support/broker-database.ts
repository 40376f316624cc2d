/** Postgres for runner-broker tests: the broker schema and the ref-resolver's (it registers Projects there). */
import { createPostgresDatabase } from "@webcodex/platform";
import type { Database } from "@webcodex/platform";
import { migrateRefResolver } from "@webcodex/ref-resolver";
import { migrateRunnerBroker } from "@webcodex/runner-broker";
import { createTestDatabase } from "./backing-services.js";

export interface BrokerTestDatabase {
  db: Database;
  /** Closes the pool and drops the database. */
  close(): Promise<void>;
}

export async function createBrokerTestDatabase(): Promise<BrokerTestDatabase> {
  const tdb = await createTestDatabase();
  const db = createPostgresDatabase({ url: tdb.url });
  await migrateRunnerBroker(db);
  await migrateRefResolver(db);
  return {
    db,
    close: async () => {
      await db.close();
      await tdb.drop();
    },
  };
}
