// What the chart must agree with, read from the project's own sources (not copied into the
// tests): the CLI's command table, each service's env spec (src/config.ts), and the
// runner-broker's Kubernetes provisioner, which builds Runner pods from the chart's template.
// Build-independent: TypeScript sources are parsed or transpiled here, no `tsc -b` needed.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const root = resolve(here, "../..");

/** The CLI entry the images and the chart run (`node <CLI_BIN> ...`). */
export const CLI_BIN = "tools/cli/bin/webcodex.js";

/**
 * The `webcodex` command table: the top-level commands (`case` labels of `run` in
 * tools/cli/src/main.ts) and the services `serve <service>` accepts (keys of SERVICE_MAINS in
 * tools/cli/src/service-mains.ts).
 */
export function cliCommands() {
  const src = readFileSync(join(root, "tools/cli/src/main.ts"), "utf8");
  const body = src.slice(src.indexOf("export async function run("));
  const commands = [...body.matchAll(/^\s*case "([a-z][a-z-]*)":/gm)].map((m) => m[1]);
  const mains = readFileSync(join(root, "tools/cli/src/service-mains.ts"), "utf8");
  const mainsStart = mains.indexOf("export const SERVICE_MAINS");
  const mainsEnd = mains.indexOf("};", mainsStart);
  if (mainsStart < 0 || mainsEnd < 0) throw new Error("tools/cli/src/service-mains.ts: the `serve` table (SERVICE_MAINS) was not found");
  const serveTargets = [...mains.slice(mainsStart, mainsEnd).matchAll(/^\s*"?([a-z][a-z-]*)"?:\s*\(\)\s*=>\s*import\(/gm)].map((m) => m[1]);
  if (commands.length === 0 || serveTargets.length === 0) throw new Error("tools/cli: no commands parsed");
  return { commands, serveTargets };
}

/** Source folder of each process the chart runs. */
export const SERVICE_DIRS = {
  gateway: "services/gateway",
  "tool-registry": "services/tool-registry",
  "ref-resolver": "services/ref-resolver",
  audit: "services/audit",
  "runner-broker": "services/runner-broker",
  runner: "services/runner",
};

const num = (s) => (s === undefined ? undefined : Number(s.replace(/_/g, "")));

/**
 * The env spec a service reads (its `src/config.ts`, one `{ kind, env, ... }` object per entry):
 * env name -> { kind, default, min, max, values }.
 */
export function serviceEnvSpec(service) {
  const dir = SERVICE_DIRS[service];
  if (!dir) throw new Error(`unknown service ${service}`);
  const src = readFileSync(join(root, dir, "src/config.ts"), "utf8");
  const spec = new Map();
  // One object literal per entry, on one line or spread over several (the formatter decides).
  for (const [line] of src.matchAll(/\{[^{}]*\benv: "[A-Z0-9_]+"[^{}]*\}/g)) {
    const env = line.match(/\benv: "([A-Z0-9_]+)"/)?.[1];
    if (!env) continue;
    const kind = line.match(/\bkind: "([a-z]+)"/)?.[1];
    const def = line.match(/\bdefault: ("(?:[^"\\]|\\.)*"|[-0-9_.]+|true|false)/)?.[1];
    const values = line.match(/\bvalues: \[([^\]]*)\]/)?.[1];
    spec.set(env, {
      kind,
      default: def === undefined ? undefined : kind === "int" ? num(def) : JSON.parse(def),
      min: num(line.match(/\bmin: ([-0-9_.]+)/)?.[1]),
      max: num(line.match(/\bmax: ([-0-9_.]+)/)?.[1]),
      values: values === undefined ? undefined : [...values.matchAll(/"([^"]*)"/g)].map((m) => m[1]),
      required: /\brequired: true\b/.test(line),
    });
  }
  if (spec.size === 0) throw new Error(`${dir}/src/config.ts: no env entries parsed`);
  return spec;
}

/**
 * The Runner capability catalog (libs/contracts/src/capabilities.ts, one `{ id, wire, default,
 * baselineV2 }` row per line): [{ id, wire, baselineV2 }] in wire order.
 */
export function runnerCapabilityRows() {
  const src = readFileSync(join(root, "libs/contracts/src/capabilities.ts"), "utf8");
  const rows = [...src.matchAll(/^\s*\{ id: "([A-Za-z]+)", wire: "([a-z0-9_]+)", default: false, baselineV2: (true|false) \},?$/gm)].map((m) => ({
    id: m[1],
    wire: m[2],
    baselineV2: m[3] === "true",
  }));
  if (rows.length === 0) throw new Error("libs/contracts/src/capabilities.ts: no capability rows parsed");
  return rows;
}

/** Keys of `interface RunnerPodTemplate` in the broker's Kubernetes provisioner. */
export function runnerPodTemplateInterfaceKeys() {
  const src = readFileSync(join(root, "services/runner-broker/src/provisioning/kubernetes.ts"), "utf8");
  const start = src.indexOf("export interface RunnerPodTemplate {");
  if (start < 0) throw new Error("kubernetes.ts: interface RunnerPodTemplate not found");
  const body = src.slice(start, src.indexOf("\n}", start));
  return [...body.matchAll(/^ {2}([a-zA-Z]+)\??:/gm)].map((m) => m[1]);
}

let brokerPromise;
/**
 * The runner-broker's own Kubernetes provisioner module (parseRunnerPodTemplate,
 * buildRunnerObjects) and runnerNames, transpiled from source into node_modules/.cache so
 * that `@kubernetes/client-node` resolves from the repository's node_modules.
 */
export function loadBrokerProvisioning() {
  brokerPromise ??= (async () => {
    const ts = (await import("typescript")).default;
    const cache = join(root, "node_modules/.cache");
    mkdirSync(cache, { recursive: true });
    const out = mkdtempSync(join(cache, "webcodex-chart-broker-"));
    writeFileSync(join(out, "package.json"), '{ "type": "module" }\n');
    const srcDir = join(root, "services/runner-broker/src/provisioning");
    for (const name of ["kubernetes", "provisioner"]) {
      const { outputText } = ts.transpileModule(readFileSync(join(srcDir, `${name}.ts`), "utf8"), {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
        fileName: `${name}.ts`,
      });
      writeFileSync(join(out, `${name}.js`), outputText);
    }
    let k8s, prov;
    try {
      k8s = await import(pathToFileURL(join(out, "kubernetes.js")).href);
      prov = await import(pathToFileURL(join(out, "provisioner.js")).href);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
    return {
      parseRunnerPodTemplate: k8s.parseRunnerPodTemplate,
      buildRunnerObjects: k8s.buildRunnerObjects,
      templateHash: k8s.templateHash,
      runnerNames: prov.runnerNames,
    };
  })();
  return brokerPromise;
}
