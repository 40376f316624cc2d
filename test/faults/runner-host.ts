/**
 * A Runner as its own process, serving RunnerService over HTTP on a free port, for the fault
 * suite to kill -9. Prints `RUNNER_URL <url>` once listening and `RECOVERED <json>` once
 * start-up recovery of the write journal finished.
 *
 * argv: <root> <stateDir> [recover=on|off]
 */
import { createLogger, startServiceServer } from "@webcodex/platform";
import { createRunner } from "@webcodex/runner";

const [root, stateDir, recover] = process.argv.slice(2);
if (root === undefined || stateDir === undefined) throw new Error("usage: runner-host <root> <stateDir> [on|off]");
const logger = createLogger({ service: "runner", level: "error" });
const runner = createRunner({ root, stateDir, logger, spawnHost: false, recoverJournal: recover !== "off" });
// Served as `webcodex runner` serves it.
const server = await startServiceServer({ name: "runner", port: 0, host: "127.0.0.1", ...runner.serving, logger });
process.stdout.write(`RUNNER_URL ${server.url}\n`);
process.stdout.write(`RECOVERED ${JSON.stringify(await runner.recovery)}\n`);
