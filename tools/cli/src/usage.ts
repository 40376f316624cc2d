/**
 * What `webcodex --help` and `webcodex <command> --help` print, one entry per command. Help and
 * --version load only this module and the service list (no service, no database, no MCP SDK),
 * so they answer at once even on a loaded machine.
 */
import { readFileSync } from "node:fs";
import { SERVICES } from "./services.js";

export const PROJECTS_USAGE = `webcodex projects list [--data-dir D | --postgres-url URL] [--all] [--format table|json]   every Project the store holds, including those list_projects does not offer
  --data-dir D        the embedded data dir of a stopped webcodex dev (default ~/.webcodex/data, or WEBCODEX_DATA_DIR)
  --postgres-url URL  a distributed deployment's database (or WEBCODEX_POSTGRES_URL)
  --all               also retired incarnations (deleted Projects, or an address registered again for another root)
  --format F          table (default) or json`;

export const serviceNames = SERVICES.filter((s) => s !== "runner").join(", ");

/** What `webcodex <command> --help` prints; `webcodex --help` prints every first line. */
export const COMMAND_USAGE: Record<string, string> = {
  dev: `webcodex dev --project DIR [--port N] [--host H] [--data-dir D]   all services in one process (embedded), MCP over Streamable HTTP
  --project DIR   the directory the local Runner works in (required)
  --port N        port of the MCP endpoint (default 8080, or WEBCODEX_PORT; 0 picks a free one)
  --host H        address to listen on (default 127.0.0.1)
  --data-dir D    embedded Postgres and audit spool (default ~/.webcodex/data, or WEBCODEX_DATA_DIR)
  Prints the MCP URL and a bearer token; WEBCODEX_DEV_TOKEN keeps the token stable.
  environment: WEBCODEX_PORT, WEBCODEX_DATA_DIR, WEBCODEX_DEV_TOKEN, WEBCODEX_DEV_TOKENS_FILE, WEBCODEX_DEV_CLIENT_ID, WEBCODEX_LOG_LEVEL,
    WEBCODEX_LOG_FORMAT, WEBCODEX_OAUTH_*, WEBCODEX_RATE_LIMIT*, WEBCODEX_READ_ONLY_CLIENTS, WEBCODEX_GOAL_SELECTION,
    WEBCODEX_UNATTENDED_CONTINUATION, WEBCODEX_AUDIT_*, WEBCODEX_RUNNER_* (the local Runner), WEBCODEX_GIT_CREDENTIALS_FILE,
    OTEL_EXPORTER_OTLP_ENDPOINT`,
  stdio: `webcodex stdio --project DIR [--data-dir D]   the embedded default over the MCP stdio transport, for local Hosts
  --project DIR   the directory the local Runner works in (required)
  --data-dir D    embedded Postgres and audit spool (default ~/.webcodex/stdio/<project>; one process at a time)
  stdout carries only MCP JSON-RPC; logs go to stderr. No token: the caller is the OS user.
  Exits when stdin closes, stopping every process it started.
  environment: WEBCODEX_DATA_DIR, WEBCODEX_DEV_CLIENT_ID, WEBCODEX_LOG_LEVEL, WEBCODEX_LOG_FORMAT, WEBCODEX_AUDIT_*,
    WEBCODEX_RUNNER_* (the local Runner)`,
  up: `webcodex up --project DIR [--port N] [--data-dir D]   each service its own process (needs WEBCODEX_POSTGRES_URL, WEBCODEX_REDIS_URL)
  --project DIR   the directory the local Runner works in (required)
  --port N        the first of ${SERVICES.length} consecutive ports (default 8180; the gateway is the fifth)
  --data-dir D    create_project's workspaces, under D/workspaces (default ~/.webcodex/up, or WEBCODEX_DATA_DIR)
  environment: WEBCODEX_POSTGRES_URL, WEBCODEX_REDIS_URL (required), WEBCODEX_REDIS_KEY_PREFIX, WEBCODEX_DEV_TOKEN,
    WEBCODEX_DEV_TOKENS_FILE, WEBCODEX_DEV_CLIENT_ID, WEBCODEX_OAUTH_*, WEBCODEX_RATE_LIMIT*, WEBCODEX_READ_ONLY_CLIENTS,
    WEBCODEX_RUNNER_* (the local Runner)`,
  serve: `webcodex serve <service>   one service, configured from WEBCODEX_* env
  services: ${serviceNames}
  environment: each service's WEBCODEX_* settings (docs/operators.md), WEBCODEX_LOG_LEVEL, WEBCODEX_LOG_FORMAT`,
  runner: `webcodex runner   one Runner, configured from WEBCODEX_RUNNER_* env
  needs WEBCODEX_RUNNER_ROOT, WEBCODEX_RUNNER_BROKER_URL, WEBCODEX_RUNNER_CLIENT_ID, WEBCODEX_RUNNER_PROJECT_ID`,
  migrate: `webcodex migrate   apply migrations to WEBCODEX_POSTGRES_URL
  environment: WEBCODEX_POSTGRES_URL (required; the database must exist), WEBCODEX_MIGRATE_WAIT_S (seconds to wait for it, default 0)`,
  "friction-report": `webcodex friction-report [--postgres-url URL | --data-dir D] [--format table|json]   friction patterns per tenant and tool`,
  projects: PROJECTS_USAGE,
};

export const usage = `usage:
${Object.values(COMMAND_USAGE)
  .map((u) => `  ${u.split("\n")[0]}`)
  .join("\n")}
  webcodex <command> --help                               one command's options and the environment it reads
  webcodex --version                                      the version
Logs go to stderr: readable lines on a terminal, JSON otherwise (WEBCODEX_LOG_FORMAT=json|text).`;

export const wantsHelp = (args: readonly string[]) => args.includes("--help") || args.includes("-h");

/** The version of this command (its package's). */
export function cliVersion(): string {
  return (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version;
}

/**
 * What a command line asking for help or the version prints: `webcodex`, `webcodex help`,
 * `webcodex --help`, `webcodex <command> --help`, `webcodex --version`. Undefined for any other
 * command line, and for `friction-report --help` (its usage comes with the audit module).
 */
export function helpOrVersion(argv: readonly string[]): string | undefined {
  const [command, ...rest] = argv;
  if (command === "--version" || command === "-V" || command === "version") return `webcodex ${cliVersion()}\n`;
  if (command === undefined || command === "help" || wantsHelp([command])) return `${usage}\n`;
  if (command !== "friction-report" && Object.hasOwn(COMMAND_USAGE, command) && wantsHelp(rest)) return `usage: ${COMMAND_USAGE[command]}\n`;
  return undefined;
}
