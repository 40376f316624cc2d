/**
 * The `webcodex` executable's entry: `webcodex runner` and `webcodex serve <service>` load only
 * the process they start, not the rest of the CLI (embedded mode, the distributed launcher, the
 * MCP SDK, every other service), which would otherwise make up much of each service's start on a
 * loaded machine. Help and --version are answered from usage.ts alone; every other command goes
 * to main.ts.
 */
import type { SealedEnvironment } from "@webcodex/platform";
import { serviceLoader } from "./service-mains.js";
import { helpOrVersion } from "./usage.js";

/** Moves secrets given in the environment out of /proc/self/environ (platform loads only for a service that starts). */
async function sealSecretEnvironment(): Promise<SealedEnvironment> {
  return (await import("@webcodex/platform")).sealSecretEnvironment();
}

/** Starts the one service the command line names; false when it names none (another command, help, an unknown service). */
async function startService(argv: readonly string[]): Promise<boolean> {
  const [command, ...rest] = argv;
  if (rest.includes("--help") || rest.includes("-h")) return false;
  const load = serviceLoader(command, rest[0]);
  if (load === undefined) return false;
  if (command === "runner" && process.env["WEBCODEX_RUNNER_WARM"] === "1") {
    await startWarmRunner(load);
    return true;
  }
  // Secrets given in the environment leave /proc/self/environ before any child starts.
  const { env } = await sealSecretEnvironment();
  await (await load()).main(env);
  return true;
}

/**
 * A warm Runner (a local provisioner's pool): loads the Runner's modules, says so on stdout,
 * then waits for one line on stdin, a JSON object of the WEBCODEX_RUNNER_* settings it serves
 * with (its credential among them: never in the process environment the kernel keeps), and
 * starts as `webcodex runner` would. A closed stdin without a line ends it. A warm pod (a warm
 * token file set) is claimed over an RPC instead (warm-claim.ts).
 */
async function startWarmRunner(load: NonNullable<ReturnType<typeof serviceLoader>>): Promise<void> {
  const runner = await load();
  // ps names what a pooled Runner is: unclaimed, then the Runner it became.
  process.title = "webcodex runner (warm)";
  // A warm pod (Kubernetes) is claimed over an RPC on its port, with its warm token.
  if (process.env["WEBCODEX_RUNNER_WARM_TOKEN_FILE"]) {
    const settings = await (await import("./warm-claim.js")).awaitWarmClaim();
    return startClaimed(runner, settings);
  }
  process.stdout.write("webcodex-runner-warm\n");
  const line = await new Promise<string | undefined>((resolve) => {
    let buf = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (chunk: string) => {
      buf += chunk;
      const nl = buf.indexOf("\n");
      if (nl >= 0) resolve(buf.slice(0, nl));
    });
    process.stdin.once("end", () => resolve(buf.includes("\n") ? buf.slice(0, buf.indexOf("\n")) : undefined));
  });
  if (!line) process.exit(0);
  process.stdin.destroy();
  await startClaimed(runner, JSON.parse(line) as Record<string, unknown>);
}

/** Starts a warm Runner as `webcodex runner` would, with the settings its claim named. */
async function startClaimed(runner: Awaited<ReturnType<NonNullable<ReturnType<typeof serviceLoader>>>>, settings: Record<string, unknown>): Promise<void> {
  for (const k of ["WEBCODEX_RUNNER_WARM", "WEBCODEX_RUNNER_WARM_TOKEN_FILE", "WEBCODEX_RUNNER_WARM_CREDENTIAL_FILE", "WEBCODEX_RUNNER_WARM_CLAIM_FILE"])
    delete process.env[k];
  for (const [k, v] of Object.entries(settings)) if (k.startsWith("WEBCODEX_") && typeof v === "string") process.env[k] = v;
  process.title = `webcodex runner ${process.env["WEBCODEX_RUNNER_ID"] ?? ""}`.trim();
  const { env } = await sealSecretEnvironment();
  await runner.main(env);
}

export async function runCommand(argv: string[]): Promise<void> {
  const help = helpOrVersion(argv);
  if (help !== undefined) {
    process.stdout.write(help);
    return;
  }
  if (await startService(argv)) return;
  await (await import("./main.js")).run(argv);
}
