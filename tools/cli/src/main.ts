/**
 * The `webcodex` command: dev (embedded), up (distributed on localhost), serve <service>,
 * runner, migrate, and the operator listings (projects, friction-report).
 */
import { parseArgs } from "node:util";
import { mkdirSync, readFileSync, realpathSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { homedir, userInfo } from "node:os";
import { join, resolve } from "node:path";
import type { Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createLogger, createPostgresDatabase, logFormatFor, logWriter, sealSecretEnvironment, startTelemetry } from "@webcodex/platform";
import type { LogLevel } from "@webcodex/platform";
import { skillCatalogsDirFrom } from "@webcodex/gateway";
import { modelWorkflowPolicyFrom } from "@webcodex/contracts";
import type { GatewayTestHooks } from "@webcodex/gateway";
import { parsePort, projectDirectory, UsageError } from "./args.js";
import { loadRetentionConfig } from "@webcodex/audit";
import { loadRunnerSettings, runnerSettingsSpec } from "@webcodex/runner";
import { loadToolPolicy } from "@webcodex/tool-registry";
import { defaultDataDir, projectIdFor, startEmbedded, startEmbeddedStdio } from "./embedded.js";
import { loadGitCredentials } from "./embedded-projects.js";
import { startDistributed, SERVICES } from "./distributed.js";
import { runProjects } from "./projects.js";
import { serviceLoader } from "./service-mains.js";
import { COMMAND_USAGE, helpOrVersion, serviceNames, usage, wantsHelp } from "./usage.js";
import { devAuthOptions, devTokens, refuseWithoutIsolation } from "./dev-principals.js";

/**
 * Keeps fd 1 for the protocol: anything else in this process that writes to process.stdout
 * (a library, a worker thread) is sent to stderr instead. Returns the stream the MCP transport
 * writes to.
 */
function reserveStdoutForProtocol(): Writable {
  const stdout = process.stdout;
  const realWrite = stdout.write.bind(stdout);
  stdout.write = ((chunk: string | Uint8Array, encoding?: unknown, cb?: unknown) =>
    process.stderr.write(chunk, encoding as BufferEncoding, cb as () => void)) as typeof stdout.write;
  // What the transport uses of a stream (write, and once("drain")), on the real stdout: no
  // extra stream in the path of every message.
  return { write: realWrite, once: (event: string, listener: () => void) => stdout.once(event, listener) } as unknown as Writable;
}

/**
 * A data dir (of `webcodex dev`, `stdio` or `projects`) serves one process at a time: a pid
 * file taken with O_EXCL, replaced when the pid it names is gone.
 */
function lockDataDir(dir: string): () => void {
  mkdirSync(dir, { recursive: true });
  const lock = join(dir, "webcodex.pid");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(lock, `${process.pid}\n`, { flag: "wx" });
      return () => {
        try {
          if (readFileSync(lock, "utf8").trim() === String(process.pid)) unlinkSync(lock);
        } catch {
          // already gone
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const pid = Number(readFileSync(lock, "utf8").trim());
      let alive = false;
      try {
        if (Number.isInteger(pid) && pid > 0) alive = process.kill(pid, 0);
      } catch (e) {
        alive = (e as NodeJS.ErrnoException).code === "EPERM";
      }
      if (alive) throw new UsageError(`data dir ${dir} is in use by process ${pid}; pass another --data-dir`);
      rmSync(lock, { force: true });
    }
  }
  throw new Error(`could not lock data dir ${dir}`);
}

/** Messages up to the HTTP endpoint's body limit (a 2 MB import is ~2.7 MB of base64). */
const STDIO_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

/** The local principal of `webcodex stdio`: the OS user running it. */
function localSubject(): string {
  try {
    return userInfo().username || `uid-${process.getuid?.() ?? "unknown"}`;
  } catch {
    return `uid-${process.getuid?.() ?? "unknown"}`;
  }
}

/** `webcodex up` takes one port per process, consecutive from --port. */
const UP_PORTS = SERVICES.length;

/** Runs one `webcodex` command; `testHooks` (for `dev` and `serve gateway`) only from a test launcher, never bin/webcodex.js. */
export async function run(argv: string[], testHooks?: GatewayTestHooks): Promise<void> {
  const [command, ...rest] = argv;
  const help = helpOrVersion(argv);
  if (help !== undefined) {
    process.stdout.write(help);
    return;
  }
  if (command !== undefined && command !== "help" && !wantsHelp([command]) && COMMAND_USAGE[command] === undefined)
    throw new UsageError(`unknown command ${JSON.stringify(command)} (webcodex --help lists the commands)`);
  // Secrets given in the environment leave /proc/self/environ before any child starts.
  const { env } = sealSecretEnvironment();
  switch (command) {
    case "stdio": {
      const { values } = parseArgs({ args: rest, options: { project: { type: "string" }, "data-dir": { type: "string" } } });
      if (!values.project) throw new UsageError(`--project DIR is required (webcodex stdio --help)`);
      projectDirectory(values.project);
      const protocolOut = reserveStdoutForProtocol();
      // A Host shows stderr to a person at best: JSON unless asked otherwise.
      const logger = createLogger({
        service: "webcodex-stdio",
        level: (env["WEBCODEX_LOG_LEVEL"] as LogLevel | undefined) ?? "warn",
        write: logWriter(logFormatFor(env, false)),
      });
      const projectDir = realpathSync(resolve(values.project));
      const dataDir = values["data-dir"] ?? env["WEBCODEX_DATA_DIR"] ?? join(homedir(), ".webcodex", "stdio", projectIdFor(projectDir));
      const unlock = lockDataDir(dataDir);
      const connection = new StdioServerTransport(process.stdin, protocolOut, { maxBufferSize: STDIO_MAX_MESSAGE_BYTES });
      let served: Awaited<ReturnType<typeof startEmbeddedStdio>>;
      try {
        served = await startEmbeddedStdio({
          projectDir,
          dataDir,
          clientId: env["WEBCODEX_DEV_CLIENT_ID"] || "local",
          subject: localSubject(),
          connection,
          logger,
          auditRetention: loadRetentionConfig(env),
          runner: loadRunnerSettings(env),
          toolPolicy: loadToolPolicy(env),
          ...skillCatalogsOption(env["WEBCODEX_SKILL_CATALOGS_DIR"]),
        });
      } catch (error) {
        unlock();
        throw error;
      }
      let stopping = false;
      const stop = (code: number) => {
        if (stopping) return;
        stopping = true;
        void served
          .close()
          .then(
            () => code,
            (error: unknown) => {
              logger.error("shutdown failed", { error });
              return 1;
            },
          )
          .then((exitCode) => {
            unlock();
            process.exit(exitCode);
          });
      };
      // The Host closing stdin is the normal end of a stdio server.
      process.stdin.once("end", () => stop(0));
      process.stdin.once("close", () => stop(0));
      void served.closed.then(() => stop(0));
      process.once("SIGINT", () => stop(0));
      process.once("SIGTERM", () => stop(0));
      logger.info("serving MCP over stdio", { project: projectDir, data_dir: dataDir });
      served.ready.then(
        () => logger.info("the project's Runner is ready", { project: projectDir }),
        (error: unknown) => {
          // Nothing can be served without the services: say why on stderr and end.
          process.stderr.write(`webcodex: ${error instanceof Error ? error.message : String(error)}\n`);
          stop(1);
        },
      );
      return;
    }
    case "dev": {
      const { values } = parseArgs({
        args: rest,
        options: {
          project: { type: "string" },
          port: { type: "string" },
          "data-dir": { type: "string" },
          host: { type: "string", default: "127.0.0.1" },
        },
      });
      if (!values.project) throw new UsageError(`--project DIR is required (webcodex dev --help)`);
      const port = parsePort(values.port ?? env["WEBCODEX_PORT"] ?? "8080", {
        min: 0,
        max: 65535,
        ...(values.port === undefined && env["WEBCODEX_PORT"] !== undefined ? { flag: "WEBCODEX_PORT" } : {}),
      });
      projectDirectory(values.project);
      const logger = createLogger({ service: "webcodex-dev", level: (env["WEBCODEX_LOG_LEVEL"] as LogLevel | undefined) ?? "info" });
      const { tokens, shown, clientId } = devTokens(env);
      refuseWithoutIsolation(tokens, env);
      const dataDir = values["data-dir"] ?? env["WEBCODEX_DATA_DIR"] ?? defaultDataDir();
      // One process per data dir, as for stdio: two would each issue the same refs.
      // A bad tool policy stops start-up here, naming the field.
      const toolPolicy = loadToolPolicy(env);
      const unlock = lockDataDir(dataDir);
      let embedded: Awaited<ReturnType<typeof startEmbedded>>;
      let telemetry: Awaited<ReturnType<typeof startTelemetry>>;
      try {
        telemetry = await startTelemetry("webcodex-dev", env, logger);
        embedded = await startEmbedded({
          projectDir: values.project,
          port,
          host: values.host,
          dataDir,
          tokens,
          clientId,
          logger,
          ...devAuthOptions(env, tokens.length),
          workflowPolicy: modelWorkflowPolicyFrom(env["WEBCODEX_GOAL_SELECTION"], env["WEBCODEX_UNATTENDED_CONTINUATION"]),
          toolPolicy,
          ...skillCatalogsOption(env["WEBCODEX_SKILL_CATALOGS_DIR"]),
          auditRetention: loadRetentionConfig(env),
          runner: loadRunnerSettings(env),
          gitCredentials: loadGitCredentials(env["WEBCODEX_GIT_CREDENTIALS_FILE"]),
          ...(testHooks ? { testHooks } : {}),
        });
      } catch (error) {
        unlock();
        throw error;
      }
      process.stdout.write(
        `WebCodex dev is running (embedded).\n  MCP URL: ${embedded.mcpUrl}\n  Data:    ${dataDir}\n${shown ? `  Token:   ${shown}\n  Connect a Host with header "Authorization: Bearer ${shown}".\n` : ""}`,
      );
      const stop = () =>
        void embedded
          .close()
          .then(() => telemetry.shutdown())
          .then(
            () => (unlock(), process.exit(0)),
            () => (unlock(), process.exit(1)),
          );
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      return;
    }
    case "up": {
      const { values } = parseArgs({
        args: rest,
        options: { project: { type: "string" }, port: { type: "string", default: "8180" }, "data-dir": { type: "string" } },
      });
      if (!values.project) throw new UsageError(`--project DIR is required (webcodex up --help)`);
      const basePort = parsePort(values.port, { min: 1, max: 65536 - UP_PORTS, why: `the first of ${UP_PORTS} consecutive ports` });
      projectDirectory(values.project);
      const postgresUrl = env["WEBCODEX_POSTGRES_URL"],
        redisUrl = env["WEBCODEX_REDIS_URL"];
      if (!postgresUrl || !redisUrl) throw new Error("webcodex up needs WEBCODEX_POSTGRES_URL and WEBCODEX_REDIS_URL");
      const { tokens, shown, clientId } = devTokens(env);
      const gatewayEnv: Record<string, string> = env["WEBCODEX_DEV_TOKENS_FILE"]
        ? { WEBCODEX_DEV_TOKENS_FILE: env["WEBCODEX_DEV_TOKENS_FILE"] }
        : { WEBCODEX_DEV_TOKEN: shown ?? "" };
      // OAuth and rate-limit settings reach the gateway process unchanged.
      for (const [name, value] of Object.entries(env)) {
        if (value !== undefined && /^WEBCODEX_(OAUTH_|RATE_LIMIT|READ_ONLY_CLIENTS$|SKILL_CATALOGS_DIR$)/.test(name)) gatewayEnv[name] = value;
      }
      // The local Runner's settings reach it as they reach the embedded one (`webcodex dev`).
      const runnerEnv: Record<string, string> = {};
      for (const { env: name } of Object.values(runnerSettingsSpec)) {
        const value = env[name];
        if (value !== undefined) runnerEnv[name] = value;
      }
      loadRunnerSettings(runnerEnv); // a bad value fails here, before any process starts
      refuseWithoutIsolation(tokens, env, runnerEnv);
      // A Redis key prefix lets several stacks share one Redis (the broker reads it).
      const extraEnv: Record<string, string> = env["WEBCODEX_REDIS_KEY_PREFIX"] ? { WEBCODEX_REDIS_KEY_PREFIX: env["WEBCODEX_REDIS_KEY_PREFIX"] } : {};
      // The tool policy reaches the tool-registry (the only service that reads it) as given.
      loadToolPolicy(env); // a bad policy fails here, before any process starts
      for (const name of ["WEBCODEX_TOOL_POLICY", "WEBCODEX_TOOL_POLICY_FILE"]) if (env[name]) extraEnv[name] = env[name];
      // The operator's clone allow-list reaches the broker, which passes it to created projects' Runners.
      if (env["WEBCODEX_CLONE_ALLOW_HOSTS"]) extraEnv["WEBCODEX_CLONE_ALLOW_HOSTS"] = env["WEBCODEX_CLONE_ALLOW_HOSTS"];
      // The Runner fleet's settings (idle stop, warm pool, quotas) reach the broker as given.
      for (const [name, value] of Object.entries(env)) if (name.startsWith("WEBCODEX_FLEET_") && value !== undefined) extraEnv[name] = value;
      // create_project works here: the broker starts a Runner process per created Project.
      const workspacesDir = join(values["data-dir"] ?? env["WEBCODEX_DATA_DIR"] ?? join(homedir(), ".webcodex", "up"), "workspaces");
      const stack = await startDistributed({
        basePort,
        postgresUrl,
        redisUrl,
        projectDir: values.project,
        clientId,
        gatewayEnv,
        runnerEnv,
        extraEnv,
        workspacesDir,
      });
      process.stdout.write(
        `WebCodex is running (distributed, ${SERVICES.length} processes).\n  MCP URL: ${stack.mcpUrl}\n${shown ? `  Token:   ${shown}\n` : ""}`,
      );
      const stop = () => void stack.stop().then(() => process.exit(0));
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      return;
    }
    case "serve":
    case "runner": {
      const service = rest[0];
      if (command === "serve" && service === undefined) throw new UsageError(`serve needs a service: one of ${serviceNames}`);
      const load = serviceLoader(command, service);
      if (!load) throw new UsageError(`unknown service ${JSON.stringify(service)}: one of ${serviceNames}`);
      await (await load()).main(env, command === "serve" && service === "gateway" ? testHooks : undefined);
      return;
    }
    case "migrate": {
      const url = env["WEBCODEX_POSTGRES_URL"];
      if (!url) throw new Error("webcodex migrate needs WEBCODEX_POSTGRES_URL");
      const db = createPostgresDatabase({ url });
      try {
        // The chart's hook may start before the database accepts connections: wait for it,
        // up to WEBCODEX_MIGRATE_WAIT_S (default 0: one attempt).
        const waitS = Number(env["WEBCODEX_MIGRATE_WAIT_S"] ?? "0");
        if (!Number.isInteger(waitS) || waitS < 0) throw new Error("WEBCODEX_MIGRATE_WAIT_S must be a non-negative integer");
        const deadline = Date.now() + waitS * 1000;
        for (let attempt = 1; ; attempt++) {
          try {
            await db.ping();
            break;
          } catch (error) {
            if (Date.now() >= deadline)
              throw new Error(`the database did not accept connections within ${waitS} s: ${error instanceof Error ? error.message : String(error)}`);
            process.stderr.write(`waiting for the database (attempt ${attempt})\n`);
            await new Promise((r) => setTimeout(r, 1_000));
          }
        }
        const refs = await (await import("@webcodex/ref-resolver")).migrateRefResolver(db);
        const audit = await (await import("@webcodex/audit")).migrateAudit(db);
        const broker = await (await import("@webcodex/runner-broker")).migrateRunnerBroker(db);
        process.stdout.write(`migrations applied: refs ${refs.length}, audit ${audit.length}, broker ${broker.length}\n`);
      } finally {
        await db.close();
      }
      return;
    }
    case "projects": {
      await runProjects(rest, { env, write: (text) => process.stdout.write(text), defaultDataDir: defaultDataDir(), lockDataDir });
      return;
    }
    case "friction-report": {
      const { runFrictionReport, frictionReportUsage } = await import("@webcodex/audit");
      if (wantsHelp(rest)) {
        process.stdout.write(`${frictionReportUsage}\n`);
        return;
      }
      await runFrictionReport(rest, { env, write: (text) => process.stdout.write(text) });
      return;
    }
    default:
      process.stdout.write(`${usage}\n`);
  }
}

/** WEBCODEX_SKILL_CATALOGS_DIR for the embedded gateway (checked as the distributed one checks it). */
function skillCatalogsOption(value: string | undefined): { skillCatalogsDir?: string } {
  const dir = skillCatalogsDirFrom(value);
  return dir === undefined ? {} : { skillCatalogsDir: dir };
}
