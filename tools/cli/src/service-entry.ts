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
  if (command === "runner" && process.env["WEBCODEX_RUNNER_WARM"] === "1") {
    await startWarmRunner(load);
    return true;
  }
  // Secrets given in the environment leave /proc/self/environ before any child starts.
  const { env } = sealSecretEnvironment();
  await (await load()).main(env);
  return true;
}

/**
 * A warm Runner (a local provisioner's pool): loads the Runner's modules, says so on stdout,
 * then waits for one line on stdin, a JSON object of the WEBCODEX_RUNNER_* settings it serves
 * with (its credential among them: never in the process environment the kernel keeps), and
 * starts as `webcodex runner` would. A closed stdin without a line ends it.
 */
async function startWarmRunner(load: NonNullable<ReturnType<typeof serviceLoader>>): Promise<void> {
  const runner = await load();
  // ps names what a pooled Runner is: unclaimed, then the Runner it became.
  process.title = "webcodex runner (warm)";
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
  const settings = JSON.parse(line) as Record<string, unknown>;
  delete process.env["WEBCODEX_RUNNER_WARM"];
  for (const [k, v] of Object.entries(settings)) if (k.startsWith("WEBCODEX_") && typeof v === "string") process.env[k] = v;
  process.stdin.destroy();
  process.title = `webcodex runner ${process.env["WEBCODEX_RUNNER_ID"] ?? ""}`.trim();
  const { env } = sealSecretEnvironment();
  await runner.main(env);
}

export async function runCommand(argv: string[]): Promise<void> {
  if (await startService(argv)) return;
  await (await import("./main.js")).run(argv);
}
