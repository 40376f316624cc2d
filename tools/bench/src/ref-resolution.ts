/**
 * Ref resolution at scale: bulk-loads N project_refs across P principals into a fresh
 * database, then measures the latency of the store's real resolve path against a plain
 * primary-key lookup on the same table, in the same run, one request at a time.
 *
 * The resolve path is measured COLD (pin, live-Project and visibility caches disabled), so
 * every resolution pays its full database cost: one round trip that reads the pin by
 * primary key, the live incarnation and the caller's visibility, then re-runs the ordinary
 * visibility check. A warm-cache pass (no round trip) is reported separately.
 */
import { mulberry32 } from "@webcodex/platform/prng";
import { createPostgresDatabase } from "@webcodex/platform";
import type { Database, Principal } from "@webcodex/platform";
import { createProjectStore, migrateRefResolver } from "@webcodex/ref-resolver";
import { createBenchDatabase } from "./bench-database.js";
import { percentile, round } from "./stats.js";
import type { BenchResult } from "./stats.js";

export interface RefResolutionBenchOptions {
  /** Admin URL of the Postgres server; a fresh database is created on it and dropped after. */
  postgresUrl: string;
  /** Total project_refs to load (default 1,000,000). */
  refs?: number;
  /** Principals they are spread over (default 10,000). */
  principals?: number;
  /** Resolutions measured per path (default 20,000). */
  samples?: number;
}

const SUBJECTS_PER_CLIENT = 10;

const micros = (start: bigint) => Number(process.hrtime.bigint() - start) / 1000;

export async function benchRefResolution(options: RefResolutionBenchOptions): Promise<BenchResult> {
  const totalRefs = options.refs ?? 1_000_000;
  const principals = options.principals ?? 10_000;
  const samples = options.samples ?? 20_000;
  if (!Number.isInteger(totalRefs) || !Number.isInteger(principals) || totalRefs < principals || principals < 1)
    throw new RangeError("refs must be an integer >= principals >= 1");
  const refsPerPrincipal = Math.ceil(totalRefs / principals);
  const clients = Math.ceil(principals / SUBJECTS_PER_CLIENT);

  const benchDb = await createBenchDatabase(options.postgresUrl, "wcx_bench_refs");
  const db: Database = createPostgresDatabase({ url: benchDb.url, max: 4, statementTimeoutMs: 900_000 });
  try {
    await migrateRefResolver(db);

    // Bulk load in three set-based statements: each client owns `refsPerPrincipal` live
    // Projects; each of its subjects (principals) holds a ref to every one of them.
    const loadStart = process.hrtime.bigint();
    await db.query(
      `INSERT INTO refs.projects (canonical_id, incarnation, client_id, project_id, root_identity, name)
       SELECT 'agent:bc' || c || ':p' || j, 1, 'bc' || c, 'p' || j, '/srv/bc' || c || '/p' || j, 'p' || j
       FROM generate_series(1, $1::int) AS c, generate_series(1, $2::int) AS j`,
      [clients, refsPerPrincipal],
    );
    await db.query(
      `INSERT INTO refs.project_refs (client_id, subject, code, canonical_id, incarnation)
       SELECT 'bc' || c, 's' || s, j, 'agent:bc' || c || ':p' || j, 1
       FROM generate_series(1, $1::int) AS c, generate_series(1, $2::int) AS s, generate_series(1, $3::int) AS j
       WHERE (c - 1) * $2::int + s <= $4::int AND ((c - 1) * $2::int + s - 1) * $3::bigint + j <= $5::bigint
       ORDER BY 1, 2, 3`,
      [clients, SUBJECTS_PER_CLIENT, refsPerPrincipal, principals, totalRefs],
    );
    await db.query(
      `INSERT INTO refs.ref_counters (client_id, subject, kind, last_code)
       SELECT client_id, subject, 'project', max(code) FROM refs.project_refs GROUP BY client_id, subject`,
    );
    await db.query("ANALYZE refs.projects");
    await db.query("ANALYZE refs.project_refs");
    const loadSeconds = micros(loadStart) / 1e6;
    const loaded = await db.query<{ refs: string; principals: string }>(
      `SELECT count(*) AS refs, count(DISTINCT (client_id, subject)) AS principals FROM refs.project_refs`,
    );
    const loadedRefs = Number(loaded.rows[0]?.refs ?? 0);
    const loadedPrincipals = Number(loaded.rows[0]?.principals ?? 0);

    // Sample keys that exist: principal i (0-based) is client floor(i/10)+1, subject i%10+1.
    const random = mulberry32(0x5eed);
    const keys: Array<{ principal: Principal; code: number }> = [];
    for (let n = 0; n < samples; n++) {
      const i = Math.floor(random() * principals);
      const held = Math.min(refsPerPrincipal, totalRefs - i * refsPerPrincipal);
      keys.push({
        principal: { clientId: `bc${Math.floor(i / SUBJECTS_PER_CLIENT) + 1}`, subject: `s${(i % SUBJECTS_PER_CLIENT) + 1}` },
        code: 1 + Math.floor(random() * Math.max(1, held)),
      });
    }

    const cold = createProjectStore(db, { liveCacheTtlMs: 0, maxCachedPins: 0 });
    const pkSql = "SELECT canonical_id, incarnation FROM refs.project_refs WHERE client_id = $1 AND subject = $2 AND code = $3";
    const resolveOnce = async (k: { principal: Principal; code: number }) => {
      const r = await cold.resolve(k.principal, `~p${k.code}`);
      if (!r.ok) throw new Error(`bench ref ~p${k.code} of ${k.principal.clientId}/${k.principal.subject} did not resolve: ${r.failure.reason_code}`);
    };
    const pkOnce = async (k: { principal: Principal; code: number }) => {
      const r = await db.query(pkSql, [k.principal.clientId, k.principal.subject, k.code]);
      if (r.rowCount !== 1) throw new Error("bench primary-key lookup found no row");
    };

    // Warm up connections, plans and the buffer cache for both paths alike.
    for (const k of keys.slice(0, Math.min(2_000, keys.length))) {
      await resolveOnce(k);
      await pkOnce(k);
    }

    // Interleaved, alternating order, one request at a time: both paths see the same conditions.
    const resolveTimes: number[] = [];
    const pkTimes: number[] = [];
    for (let n = 0; n < keys.length; n++) {
      const k = keys[n] as { principal: Principal; code: number };
      const order = n % 2 === 0 ? ([resolveOnce, pkOnce] as const) : ([pkOnce, resolveOnce] as const);
      for (const step of order) {
        const t = process.hrtime.bigint();
        await step(k);
        (step === resolveOnce ? resolveTimes : pkTimes).push(micros(t));
      }
    }

    // Warm pass: the same keys through a store whose caches are hot (no round trip).
    const warm = createProjectStore(db, { liveCacheTtlMs: 600_000, maxCachedPins: samples + 1 });
    for (const k of keys) await warm.resolve(k.principal, `~p${k.code}`);
    const warmTimes: number[] = [];
    for (const k of keys) {
      const t = process.hrtime.bigint();
      const r = await warm.resolve(k.principal, `~p${k.code}`);
      warmTimes.push(micros(t));
      if (!r.ok) throw new Error("warm resolution failed");
    }

    const us = (list: number[], p: number) => Math.round(percentile(list, p));
    const resolveP50 = us(resolveTimes, 50);
    const resolveP99 = us(resolveTimes, 99);
    const pkP50 = us(pkTimes, 50);
    const pkP99 = us(pkTimes, 99);
    const ratio = (a: number, b: number) => (b > 0 ? round(a / b, 2) : 0);
    return {
      name: "ref_resolution",
      metrics: {
        refs: loadedRefs,
        principals: loadedPrincipals,
        samples: keys.length,
        load_seconds: round(loadSeconds, 1),
        resolve_cold_p50_us: resolveP50,
        resolve_cold_p99_us: resolveP99,
        pk_lookup_p50_us: pkP50,
        pk_lookup_p99_us: pkP99,
        ratio_p50: ratio(resolveP50, pkP50),
        ratio_p99: ratio(resolveP99, pkP99),
        resolve_warm_p50_us: us(warmTimes, 50),
        resolve_warm_p99_us: us(warmTimes, 99),
      },
      notes:
        "resolve_cold_*: ProjectStore.resolve('~p<n>') with its pin, live-Project and visibility caches disabled (one round trip: pin by primary key + live incarnation + visibility, then the visibility re-check); " +
        "pk_lookup_*: SELECT by the project_refs primary key through the same pool; measured interleaved, one request at a time, after a warm-up. " +
        "resolve_warm_*: the same keys with hot caches (no round trip). Latencies in microseconds.",
    };
  } finally {
    await db.close();
    await benchDb.drop().catch(() => undefined);
  }
}
