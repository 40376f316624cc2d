/**
 * Embedded mode (`webcodex dev`): all six services in one process, each called through an
 * in-process Connect client (no serialization; see docs/decisions/0002-embedded-transport.md), PGlite with its data dir on disk, the in-process runner
 * registry, and a local Runner on one directory. The services are the same code as in
 * distributed mode; only the transports differ.
 */
import { basename, join, resolve } from "node:path";
import { homedir } from "node:os";
import { chmodSync, mkdirSync, realpathSync, statSync } from "node:fs";
import { createClient } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import { AuditService, RefResolverService, RunnerBrokerService, RunnerService, ToolRegistryService } from "@webcodex/proto";
import { createInProcessClient, createMetrics, createPgliteDatabase, createServiceTransport, startServiceServer } from "@webcodex/platform";
import type { HttpHandler, Logger, PgliteMemory, ServiceServer } from "@webcodex/platform";
import { createToolRegistry } from "@webcodex/tool-registry";
import { checkRefStores, createRefResolver, migrateRefResolver } from "@webcodex/ref-resolver";
import { createAudit, loadRetentionConfig, migrateAudit, startAuditRetention } from "@webcodex/audit";
import type { AuditRetentionConfig } from "@webcodex/audit";
import {
  createJobContinuationStore,
  createJobStore,
  createLeaseStore,
  createMemoryLeaseBackend,
  createMemoryLiveJobBackend,
  createMemoryRunnerRegistry,
  createPostgresFenceHighWaterMark,
  createRunnerBroker,
  migrateRunnerBroker,
  startJobReconciler,
} from "@webcodex/runner-broker";
import { createRunner, RUNNER_BUILD, runnerSettingsOptions, startRegistration } from "@webcodex/runner";
import type { GitCredential, RunnerSettings } from "@webcodex/runner";
import type { ToolPolicy } from "@webcodex/contracts";
import { createInProcessProvisioner } from "./embedded-projects.js";
import { createGateway, createStaticTokenAuthenticator } from "@webcodex/gateway";
import type { Caller, Gateway, GatewayDeps, GatewayTestHooks, StaticTokenEntry } from "@webcodex/gateway";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

export interface EmbeddedOptions {
  projectDir: string;
  port: number;
  host?: string;
  dataDir?: string;
  tokens: StaticTokenEntry[];
  /** Client id the local Project is registered under (the dev tokens' tenant). */
  clientId: string;
  projectId?: string;
  heartbeatIntervalMs?: number;
  /** JWT bearer tokens from an OAuth authorization server, besides the dev tokens. */
  oauth?: GatewayDeps["oauth"];
  readOnlyClients?: readonly string[];
  /** Per-tenant tools/call limit (off when absent). */
  rateLimit?: GatewayDeps["rateLimit"];
  /** ModelWorkflowPolicy (WEBCODEX_GOAL_SELECTION, WEBCODEX_UNATTENDED_CONTINUATION). */
  workflowPolicy?: GatewayDeps["workflowPolicy"];
  /** The operator's tool policy (WEBCODEX_TOOL_POLICY or WEBCODEX_TOOL_POLICY_FILE), checked at start-up. */
  toolPolicy?: ToolPolicy | undefined;
  /** Directory of per-tenant Agent Skills catalogs (WEBCODEX_SKILL_CATALOGS_DIR). */
  skillCatalogsDir?: string;
  /** ActionAudit retention and partition maintenance (default: 90 days, 7 ahead, hourly). */
  auditRetention?: AuditRetentionConfig;
  /**
   * The local Runner's settings, read from the same WEBCODEX_RUNNER_* variables as
   * `webcodex runner` (spawn host, sensitive write globs, withheld capabilities).
   */
  runner?: RunnerSettings;
  /** Per-tenant git credentials for create_project clones (the operator's; never shown). */
  gitCredentials?: Readonly<Record<string, GitCredential>>;
  logger: Logger;
  /** The gateway's test hooks: only a test harness's launcher passes them. */
  testHooks?: GatewayTestHooks;
}

export interface Embedded {
  readonly url: string;
  readonly mcpUrl: string;
  readonly server: ServiceServer;
  close(): Promise<void>;
}

export const defaultDataDir = () => join(homedir(), ".webcodex", "data");

/** A project id from a directory name: the characters a canonical id allows. */
export function projectIdFor(dir: string): string {
  return (
    basename(dir)
      .replace(/[^A-Za-z0-9._-]/g, "-")
      .slice(0, 128) || "project"
  );
}

/** The options both the HTTP and the stdio front ends share. */
type CoreOptions = Omit<EmbeddedOptions, "port" | "host" | "tokens" | "oauth" | "readOnlyClients" | "rateLimit">;

/** The services behind the gateway, running in this process. */
type CoreClients = Omit<GatewayDeps["clients"], "toolRegistry">;

interface Core {
  clients: CoreClients;
  /** The embedded database's WebAssembly memory and worker heap, for /metrics. */
  databaseMemory(): PgliteMemory;
  ping(): Promise<void>;
  retentionDays: number;
  close(): Promise<void>;
}

type FrontEnd = Pick<GatewayDeps, "authenticator" | "publicUrl" | "allowedHosts" | "metrics"> &
  Partial<Pick<GatewayDeps, "oauth" | "readOnlyClients" | "rateLimit">>;

/** The gateway of the embedded default: the in-process tool registry plus the core's services. */
function embeddedGateway(options: CoreOptions, clients: CoreClients, ping: () => Promise<void>, frontEnd: FrontEnd): Promise<Gateway> {
  return createGateway({
    clients: {
      toolRegistry: createInProcessClient(ToolRegistryService, createToolRegistry({ policy: options.toolPolicy }), { traceAs: "tool-registry" }),
      ...clients,
    },
    ...frontEnd,
    ...(options.workflowPolicy ? { workflowPolicy: options.workflowPolicy } : {}),
    ...(options.skillCatalogsDir !== undefined ? { skillCatalogsDir: options.skillCatalogsDir } : {}),
    dependencyProbes: { postgres: ping },
    mode: "embedded",
    // One process holds the gateway and the audit store, so no gateway can die alone: read
    // rows are batched (PGlite blocks a thread for each statement) and answered at once;
    // effectful calls are still answered only once their row is durable.
    auditFlushMs: 250,
    auditReadsWaitForStore: false,
    // Records the in-process audit cannot take (PGlite busy or failing) survive a restart here.
    auditSpoolDir: join(options.dataDir ?? defaultDataDir(), "audit-spool"),
    version: "0.1.0",
    logger: options.logger,
    ...(options.testHooks ? { testHooks: options.testHooks } : {}),
  });
}

/**
 * A Connect client whose calls wait for the real one: the stdio front end answers
 * `initialize` and `tools/list` while the embedded services are still starting.
 */
function deferredClient<T extends object>(ready: Promise<T>): T {
  return new Proxy({} as T, {
    get:
      (_target, method) =>
      async (...args: unknown[]) => {
        const client = (await ready) as Record<string | symbol, (...a: unknown[]) => unknown>;
        return client[method]?.(...args);
      },
  });
}

/** PGlite, the six services and the local Runner, registered: everything but the front end. */
async function startCore(options: CoreOptions): Promise<Core> {
  const projectDir = realpathSync(resolve(options.projectDir));
  if (!statSync(projectDir).isDirectory()) throw new Error(`${projectDir} is not a directory`);
  const logger = options.logger;
  const dataDir = options.dataDir ?? defaultDataDir();
  // Tokens' state, the database, the journal and the workspaces live here: the server's user's alone.
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  chmodSync(dataDir, 0o700);
  const db = await createPgliteDatabase(join(dataDir, "postgres"));
  await migrateRefResolver(db);
  // Says what it repaired (a counter left behind by an earlier run, e.g. two processes on one data dir).
  await checkRefStores(db, logger.child({ component: "ref-resolver" }));
  await migrateAudit(db);
  const retention = options.auditRetention ?? loadRetentionConfig({});
  const maintenance = await startAuditRetention(db, retention, logger.child({ component: "audit" }));

  await migrateRunnerBroker(db);

  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 5_000;
  const runner = createRunner({
    root: projectDir,
    logger: logger.child({ component: "runner" }),
    ...(options.runner === undefined ? {} : runnerSettingsOptions(options.runner)),
    // The write journal lives under the data directory, outside the project.
    stateDir: join(dataDir, "runner-state", options.projectId ?? projectIdFor(projectDir)),
  });
  // In-process hops run in SERVER spans named like the distributed services, so a trace shows
  // the same services in both modes.
  const localRunners = new Map<string, Client<typeof RunnerService>>([
    ["local:runner", createInProcessClient(RunnerService, runner.service, { traceAs: "runner" })],
  ]);
  const refResolver = createInProcessClient(RefResolverService, createRefResolver({ db, liveCacheTtlMs: Number.POSITIVE_INFINITY }), {
    traceAs: "ref-resolver",
  });
  const jobs = createJobStore({ live: createMemoryLiveJobBackend(), db });
  // Projects made by create_project: one in-process Runner each, on a workspace in the data dir.
  let brokerClient: Client<typeof RunnerBrokerService> | undefined;
  const provisioner = createInProcessProvisioner({
    dataDir,
    broker: () => {
      if (!brokerClient) throw new Error("broker not ready");
      return brokerClient;
    },
    runners: localRunners,
    runnerOptions: options.runner === undefined ? {} : runnerSettingsOptions(options.runner),
    gitCredentials: options.gitCredentials ?? {},
    logger,
  });
  // Records left open by an earlier run (its in-process live state died with it) are closed
  // as lost_after_reconcile.
  const reconciler = startJobReconciler(jobs, 30_000, logger.child({ component: "runner-broker" }));
  const broker = createInProcessClient(
    RunnerBrokerService,
    createRunnerBroker({
      registry: createMemoryRunnerRegistry({ lostAfterMs: heartbeatIntervalMs * 2 }),
      refResolver,
      runnerClient: (url) => localRunners.get(url) ?? createClient(RunnerService, createServiceTransport(url)),
      heartbeatIntervalMs,
      // Fences survive restarts through the PGlite high-water mark, as they survive a Redis
      // wipe in distributed mode; Job records are kept the same way.
      leases: createLeaseStore(createMemoryLeaseBackend(), createPostgresFenceHighWaterMark(db)),
      jobs,
      continuations: createJobContinuationStore({ db }),
      provisioner,
      logger: logger.child({ component: "runner-broker" }),
    }),
    { traceAs: "runner-broker" },
  );
  brokerClient = broker;
  const registration = startRegistration({
    broker,
    runnerId: runner.runnerId,
    clientId: options.clientId,
    projectId: options.projectId ?? projectIdFor(projectDir),
    rootIdentity: await runner.rootIdentity(),
    build: RUNNER_BUILD,
    capabilities: runner.capabilities,
    endpointUrl: "local:runner",
    containment: runner.containment,
    fence: runner.fence,
    recovered: runner.recovery,
    logger: logger.child({ component: "runner" }),
  });
  // The local project's Runner is registered before any Host can connect: the first
  // list_projects already shows it.
  await registration.registered;
  return {
    clients: {
      refResolver,
      broker,
      audit: createInProcessClient(AuditService, createAudit({ db, retentionDays: retention.retentionDays }), { traceAs: "audit" }),
    },
    databaseMemory: () => db.memory(),
    ping: () => db.ping(),
    retentionDays: retention.retentionDays,
    async close() {
      reconciler.stop();
      registration.stop();
      await runner.close();
      await provisioner.close();
      maintenance.stop();
      await db.close();
    },
  };
}

export async function startEmbedded(options: EmbeddedOptions): Promise<Embedded> {
  const core = await startCore(options);
  const logger = options.logger;
  const metrics = createMetrics();
  metrics.sampledGauge(
    "webcodex_pglite_wasm_memory_bytes",
    "WebAssembly memory of the embedded Postgres (it never shrinks)",
    () => core.databaseMemory().wasmBytes,
  );
  metrics.sampledGauge(
    "webcodex_pglite_worker_heap_used_bytes",
    "V8 heap in use by the embedded Postgres's worker thread",
    () => core.databaseMemory().heapUsedBytes,
  );
  const host = options.host ?? "127.0.0.1";
  const publicHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  // The port is only known after listen when 0 is asked for: routes are filled in once the
  // gateway (which needs its public URL) exists; until then /mcp is 404 and /readyz not ready.
  const httpRoutes: Record<string, HttpHandler> = {};
  let gateway: Gateway | undefined;
  const server = await startServiceServer({
    name: "webcodex-dev",
    port: options.port,
    host,
    logger,
    metrics,
    httpRoutes,
    readiness: () => (gateway ? gateway.readiness() : Promise.resolve({ ready: false, checks: { gateway: { ok: false, detail: "starting" } } })),
  });
  const url = `http://${publicHost}:${server.port}`;
  gateway = await embeddedGateway(options, core.clients, core.ping, {
    authenticator: createStaticTokenAuthenticator(options.tokens),
    ...(options.oauth ? { oauth: options.oauth } : {}),
    ...(options.readOnlyClients ? { readOnlyClients: options.readOnlyClients } : {}),
    ...(options.rateLimit ? { rateLimit: options.rateLimit } : {}),
    publicUrl: url,
    allowedHosts: ["localhost", "127.0.0.1", "[::1]", publicHost],
    metrics,
  });
  Object.assign(httpRoutes, gateway.httpRoutes);
  return {
    url,
    mcpUrl: `${url}/mcp`,
    server,
    async close() {
      await server.close();
      await gateway?.close();
      await core.close();
    },
  };
}

export interface EmbeddedStdioOptions extends CoreOptions {
  /** The local principal: the OS user, in the tenant the project is registered under. */
  subject: string;
  /** The MCP connection to serve (a StdioServerTransport on the process's stdin/stdout). */
  connection: Transport;
}

export interface EmbeddedStdio {
  /** Resolves when the peer closed the connection (stdin ended). */
  readonly closed: Promise<void>;
  /** Resolves once the services and the local Runner are up; rejects if they cannot start. */
  readonly ready: Promise<void>;
  close(): Promise<void>;
}

/**
 * The embedded default served over one stdio connection: no HTTP listener and no token (the
 * pipe belongs to the process that started it); the caller is the local principal.
 */
export async function startEmbeddedStdio(options: EmbeddedStdioOptions): Promise<EmbeddedStdio> {
  // The connection is served at once: initialize and tools/list need no backing service, and
  // calls wait (deferred clients) while the database, the services and the Runner start.
  const starting = startCore(options);
  starting.catch(() => undefined);
  const clients = starting.then((core) => core.clients);
  const gateway = await embeddedGateway(
    options,
    {
      refResolver: deferredClient(clients.then((c) => c.refResolver)),
      broker: deferredClient(clients.then((c) => c.broker)),
      audit: deferredClient(clients.then((c) => c.audit)),
    },
    async () => (await starting).ping(),
    {
      // No listener: nothing answers HTTP, so the authenticator never admits anyone.
      authenticator: { authenticate: () => Promise.resolve(undefined) },
      publicUrl: "http://127.0.0.1",
      allowedHosts: [],
    },
  );
  const caller: Caller = {
    principal: { clientId: options.clientId, subject: options.subject },
    admissionProfile: "full",
    scopes: ["webcodex:read", "webcodex:write"],
  };
  const connection = await gateway.serveLocal(options.connection, caller);
  let closing: Promise<void> | undefined;
  return {
    closed: connection.closed,
    ready: starting.then(() => undefined),
    close: () =>
      (closing ??= (async () => {
        await connection.close();
        await gateway.close();
        const core = await starting.catch(() => undefined);
        await core?.close();
      })()),
  };
}
