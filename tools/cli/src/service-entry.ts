/**
 * The `webcodex` executable's entry: `webcodex runner` and `webcodex serve <service>` load only
 * the process they start, not the rest of the CLI (embedded mode, the distributed launcher, the
 * MCP SDK, every other service), which would otherwise make up much of each service's start on a
 * loaded machine. Every other command, and help, goes to main.ts.
 */
import { sealSecretEnvironment } from "@webcodex/platform";
import { serviceLoader } from "./service-mains.js";

/** Starts the one service the command line names; false when it names none (another command, help, an unknown service). */
async function startService(argv: readonly string[]): Promise<boolean> {
  const [command, ...rest] = argv;
  if (rest.includes("--help") || rest.includes("-h")) return false;
  const load = serviceLoader(command, rest[0]);
  if (load === undefined) return false;
  // Secrets given in the environment leave /proc/self/environ before any child starts.
  const { env } = sealSecretEnvironment();
  await (await load()).main(env);
  return true;
}

export async function runCommand(argv: string[]): Promise<void> {
  if (await startService(argv)) return;
  await (await import("./main.js")).run(argv);
}
