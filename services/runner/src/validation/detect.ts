/**
 * One concept over 400 lines: detection of a package's validators, per provider.
 * Detection: which validators a project defines, read from its files only (package.json
 * scripts, tsconfig, ESLint config, pyproject/pytest config, go.mod, Cargo.toml). Nothing is
 * guessed: what is found but not certain (two lockfiles, a test script of an unknown runner,
 * a tool not installed in the project) is reported as skipped with the reason.
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import {
  parseCargoCheck,
  parseCargoTest,
  parseEslint,
  parseGoCompilerStyle,
  parseGoTestJson,
  parseJestJson,
  parseNodeTestTap,
  parsePytestJunit,
  parseScriptBuild,
  parseTsc,
  parseUnittest,
} from "./parsers.js";
import { CHECK_ORDER } from "./types.js";
import { isVirtualCargoManifest } from "./workspace.js";
import type { CheckKind, Parser, ProviderName, SkippedCheck } from "./types.js";

/** The Runner capability each provider needs (wire names). */
export const PROVIDER_CAPABILITY: Record<ProviderName, string> = {
  node: "validation_node_v1",
  python: "validation_python_v1",
  go: "validation_go_v1",
  rust: "validation_rust_v1",
};

/** One validator run: argv (or a shell script from package.json), how to parse it. */
export interface Step {
  check: CheckKind;
  provider: ProviderName;
  /** argv; with `script`, run as `sh -c script`. */
  argv: string[];
  script?: string;
  command_summary: string;
  parser: Parser;
  /** The validator writes its report to this file (a placeholder replaced by a temp path). */
  reportFile?: boolean;
  env?: Record<string, string>;
  /** The package directory it runs in, project-relative ("." or absent: the project root). */
  dir?: string;
  /** The package the step belongs to, when the run covers more than the root package. */
  package?: string;
}

export interface Plan {
  steps: Step[];
  skipped: SkippedCheck[];
  detected: string[];
  notes: string[];
}

export interface DetectOptions {
  /** The package directory detection reads (absolute). */
  root: string;
  /** The project root (absolute), when the package is below it: installed tools are looked up from the package up to here. */
  projectRoot?: string;
  checks: readonly CheckKind[];
  paths: readonly string[];
  /** Capability wire names the Runner advertises; a provider without its row is skipped. */
  capabilities: ReadonlySet<string>;
  /** Whether `python3 -m pytest` is importable (probed by the caller). */
  pytest: () => boolean;
  /** The project root of a run that also covers these packages below it (project-relative): it leaves their checks to them. */
  workspaceRoot?: { members: readonly string[] };
  /** Use configuration found above the package (a run narrowed by paths). */
  inheritConfig?: boolean;
}

/** The placeholder in argv for a report file path. */
export const REPORT = "\u0000report";

const ESLINT_CONFIGS = [
  "eslint.config.js",
  "eslint.config.mjs",
  "eslint.config.cjs",
  "eslint.config.ts",
  ".eslintrc.js",
  ".eslintrc.cjs",
  ".eslintrc.json",
  ".eslintrc.yml",
  ".eslintrc.yaml",
  ".eslintrc",
];
const LOCKFILES: Record<string, string> = { "package-lock.json": "npm", "yarn.lock": "yarn", "pnpm-lock.yaml": "pnpm", "bun.lockb": "bun" };
const PYTHON_MARKERS = ["pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini", "setup.py"];

function readJson(file: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(readFileSync(file, "utf8"));
    return typeof v === "object" && v !== null ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function quote(arg: string): string {
  return /^[\w@%+=:,./-]+$/u.test(arg) ? arg : `'${arg.replace(/'/gu, "'\\''")}'`;
}

export function summarize(argv: readonly string[]): string {
  const text = argv
    .filter((a) => a !== REPORT)
    .map(quote)
    .join(" ");
  return text.length <= 200 ? text : `${text.slice(0, 199)}…`;
}

function step(s: Omit<Step, "command_summary"> & { command_summary?: string }): Step {
  return { ...s, command_summary: s.command_summary ?? summarize(s.argv) };
}

/** The module path declared in go.mod, if any. */
export function goModulePath(root: string): string | undefined {
  try {
    return /^module\s+(\S+)/mu.exec(readFileSync(path.join(root, "go.mod"), "utf8"))?.[1];
  } catch {
    return undefined;
  }
}

/** `./p/...` package patterns for paths in a module (the default: every package); a file stands for its own package. */
export function goPackages(paths: readonly string[], root?: string): string[] {
  if (paths.length === 0) return ["./..."];
  const patterns = paths.map((p) => {
    const clean = p.replace(/\/+$/u, "");
    if (clean === "." || clean === "") return "./...";
    if (root !== undefined && existsSync(path.join(root, clean)) && !statSync(path.join(root, clean)).isDirectory()) {
      const dir = path.posix.dirname(clean);
      return dir === "." ? "." : `./${dir}`;
    }
    return `./${clean}/...`;
  });
  return [...new Set(patterns)];
}

/** Node's default test file names (`node --test` without arguments finds the same files). */
const NODE_TEST_FILE = /^(?:.*[._-])?test(?:[._-].*)?\.[cm]?js$/u;
const NODE_SCRIPT = /\.[cm]?js$/u;

/**
 * The paths `node --test` is given, with each directory replaced by the test files below it
 * (by node's default names, node_modules and dot-directories left out). Node 20 runs a
 * directory argument; from Node 22 on arguments are globs and a directory matches nothing, so
 * the Runner lists the files itself and both behave alike.
 */
export function nodeTestPaths(root: string, paths: readonly string[], cap = 10_000): string[] {
  const out: string[] = [];
  const walk = (rel: string, underTest: boolean): void => {
    let names: string[];
    try {
      names = readdirSync(path.join(root, rel)).sort();
    } catch {
      return;
    }
    for (const name of names) {
      if (out.length >= cap) return;
      if (name === "node_modules" || name.startsWith(".")) continue;
      const child = path.join(rel, name);
      let isDir: boolean;
      try {
        isDir = statSync(path.join(root, child)).isDirectory();
      } catch {
        continue;
      }
      if (isDir) walk(child, underTest || name === "test");
      else if (NODE_TEST_FILE.test(name) || (underTest && NODE_SCRIPT.test(name))) out.push(child);
    }
  };
  for (const p of paths) {
    let isDir = false;
    try {
      isDir = statSync(path.join(root, p)).isDirectory();
    } catch {
      // A missing path is passed on: node reports it.
    }
    if (!isDir) out.push(p);
    else {
      const before = out.length;
      walk(p, path.basename(path.resolve(root, p)) === "test");
      if (out.length === before) out.push(p);
    }
  }
  return out;
}

function nodeSteps(o: DetectOptions, plan: Plan): void {
  const pkg = readJson(path.join(o.root, "package.json"));
  const hasTsconfig = existsSync(path.join(o.root, "tsconfig.json"));
  if (!pkg && !hasTsconfig) return;
  const locks = Object.keys(LOCKFILES).filter((f) => existsSync(path.join(o.root, f)));
  if (locks.length > 1) plan.notes.push(`package_manager_ambiguous: ${locks.join(", ")} (scripts run directly, no install is attempted)`);
  // Installed tools: the package's own, then each directory above it up to the project root (hoisted workspaces).
  const binDirs: string[] = [];
  for (let d = o.root; ; d = path.dirname(d)) {
    binDirs.push(path.join(d, "node_modules", ".bin"));
    if (o.projectRoot === undefined || d === o.projectRoot || path.relative(o.projectRoot, d).startsWith("..") || d === path.dirname(d)) break;
  }
  // ESLint looks for its configuration from the directory it runs in upwards; a whole-project
  // run lints with the root's configuration once, at the root.
  const eslintConfig = (o.inheritConfig ? binDirs : binDirs.slice(0, 1))
    .map((b) => path.dirname(path.dirname(b)))
    .flatMap((d) => ESLINT_CONFIGS.filter((f) => existsSync(path.join(d, f))).map((f) => path.relative(o.root, path.join(d, f))))[0];
  plan.detected.push(...[pkg ? "package.json" : "", hasTsconfig ? "tsconfig.json" : "", eslintConfig ?? ""].filter((s) => s !== ""));
  const bin = (name: string) => binDirs.map((d) => path.join(d, name)).find((b) => existsSync(b)) ?? path.join(binDirs[0] as string, name);
  const scripts = (pkg?.["scripts"] ?? {}) as Record<string, unknown>;
  const skip = (check: CheckKind, reason: string, found?: string[]) => {
    // A workspace root without a script of its own leaves that check to its packages.
    if (o.workspaceRoot && (reason === "no_test_script" || reason === "no_build_script")) return;
    plan.skipped.push({ check, provider: "node", reason, ...(found ? { found } : {}) });
  };
  const want = (c: CheckKind) => o.checks.includes(c);
  // As `npm run` does: the project's bins first; then this node, so `#!/usr/bin/env node` tools run with it.
  const nodeEnv = { PATH: `${binDirs.join(":")}:${path.dirname(process.execPath)}:${process.env["PATH"] ?? ""}` };

  if (want("typecheck") && hasTsconfig) {
    if (existsSync(bin("tsc")))
      plan.steps.push(
        step({
          check: "typecheck",
          provider: "node",
          argv: [bin("tsc"), "--noEmit", "--pretty", "false", "-p", "tsconfig.json"],
          command_summary: "tsc --noEmit --pretty false -p tsconfig.json",
          parser: parseTsc,
          env: nodeEnv,
        }),
      );
    else skip("typecheck", "typescript_not_installed", ["tsconfig.json"]);
  }
  if (want("lint") && eslintConfig) {
    const targets = o.paths.length > 0 ? [...o.paths] : ["."];
    if (existsSync(bin("eslint")))
      plan.steps.push(
        step({
          check: "lint",
          provider: "node",
          argv: [bin("eslint"), "--format", "json", ...targets],
          command_summary: summarize(["eslint", "--format", "json", ...targets]),
          parser: parseEslint,
          env: nodeEnv,
        }),
      );
    else skip("lint", "eslint_not_installed", [eslintConfig]);
  }
  if (want("test") && pkg) {
    const test = typeof scripts["test"] === "string" ? (scripts["test"] as string) : undefined;
    if (test === undefined || /no test specified/u.test(test)) skip("test", "no_test_script");
    else if (/\bvitest\b/u.test(test)) {
      if (existsSync(bin("vitest")))
        plan.steps.push(
          step({
            check: "test",
            provider: "node",
            argv: [bin("vitest"), "run", "--reporter=json", `--outputFile=${REPORT}`, ...o.paths],
            command_summary: summarize(["vitest", "run", "--reporter=json", ...o.paths]),
            parser: parseJestJson,
            reportFile: true,
            env: nodeEnv,
          }),
        );
      else skip("test", "vitest_not_installed", [`scripts.test: ${test}`]);
    } else if (/\bjest\b/u.test(test)) {
      if (existsSync(bin("jest")))
        plan.steps.push(
          step({
            check: "test",
            provider: "node",
            argv: [bin("jest"), "--json", `--outputFile=${REPORT}`, ...o.paths],
            command_summary: summarize(["jest", "--json", ...o.paths]),
            parser: parseJestJson,
            reportFile: true,
            env: nodeEnv,
          }),
        );
      else skip("test", "jest_not_installed", [`scripts.test: ${test}`]);
    } else if (/\bnode\b[^&|;]*\s--test\b/u.test(test)) {
      if (o.paths.length > 0) {
        const argv = [process.execPath, "--test", "--test-reporter=tap", ...nodeTestPaths(o.root, o.paths)];
        plan.steps.push(
          step({ check: "test", provider: "node", argv, command_summary: summarize(["node", ...argv.slice(1)]), parser: parseNodeTestTap, env: nodeEnv }),
        );
      } else if (/--test-reporter/u.test(test)) {
        skip("test", "test_reporter_already_set", [`scripts.test: ${test}`]);
      } else {
        // The project's own script, with node's TAP reporter on stdout (as `npm test` would run it).
        const script = test.replace(/(\bnode\b[^&|;]*?\s)--test\b/u, "$1--test --test-reporter=tap");
        plan.steps.push(
          step({
            check: "test",
            provider: "node",
            argv: ["sh", "-c", script],
            script,
            command_summary: summarize(["sh", "-c", script]),
            parser: parseNodeTestTap,
            env: nodeEnv,
          }),
        );
      }
    } else skip("test", "test_runner_not_recognized", [`scripts.test: ${test}`]);
  }
  if (want("build") && pkg) {
    const build = typeof scripts["build"] === "string" ? (scripts["build"] as string) : undefined;
    if (build === undefined) skip("build", "no_build_script");
    else
      plan.steps.push(
        step({
          check: "build",
          provider: "node",
          argv: ["sh", "-c", build],
          script: build,
          command_summary: summarize(["sh", "-c", build]),
          parser: parseScriptBuild,
          env: nodeEnv,
        }),
      );
  }
}

function pythonSteps(o: DetectOptions, plan: Plan): void {
  const markers = PYTHON_MARKERS.filter((f) => existsSync(path.join(o.root, f)));
  if (markers.length === 0) return;
  plan.detected.push(...markers);
  if (!o.checks.includes("test")) return;
  if (o.pytest()) {
    const ignore = (o.workspaceRoot?.members ?? []).map((m) => `--ignore=${m}`);
    const argv = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", `--junitxml=${REPORT}`, ...ignore, ...o.paths];
    plan.steps.push(
      step({
        check: "test",
        provider: "python",
        argv,
        command_summary: summarize(["python3", "-m", "pytest", "-q", "--junitxml", ...o.paths]),
        parser: parsePytestJunit,
        reportFile: true,
        env: { PYTHONDONTWRITEBYTECODE: "1" },
      }),
    );
  } else {
    const argv = ["python3", "-m", "unittest", "discover", "-v", ...(o.paths.length > 0 ? ["-s", o.paths[0] as string, "-t", "."] : [])];
    plan.steps.push(step({ check: "test", provider: "python", argv, parser: parseUnittest, env: { PYTHONDONTWRITEBYTECODE: "1" } }));
    plan.notes.push("pytest_not_installed: ran python -m unittest instead");
  }
}

function goSteps(o: DetectOptions, plan: Plan): void {
  if (!existsSync(path.join(o.root, "go.mod"))) return;
  plan.detected.push("go.mod");
  const pkgs = goPackages(o.paths, o.root);
  if (o.checks.includes("build"))
    plan.steps.push(step({ check: "build", provider: "go", argv: ["go", "build", ...pkgs], parser: parseGoCompilerStyle("build") }));
  if (o.checks.includes("lint")) plan.steps.push(step({ check: "lint", provider: "go", argv: ["go", "vet", ...pkgs], parser: parseGoCompilerStyle("lint") }));
  // vet runs as its own check, so `go test` does not stop at a vet finding before testing.
  if (o.checks.includes("test"))
    plan.steps.push(step({ check: "test", provider: "go", argv: ["go", "test", "-json", "-vet=off", ...pkgs], parser: parseGoTestJson(goModulePath(o.root)) }));
}

function rustSteps(o: DetectOptions, plan: Plan): void {
  if (!existsSync(path.join(o.root, "Cargo.toml"))) return;
  // A virtual workspace manifest has no code of its own; its members run as packages.
  if (o.workspaceRoot && o.workspaceRoot.members.length > 0 && isVirtualCargoManifest(o.root)) return;
  plan.detected.push("Cargo.toml");
  if (o.checks.includes("typecheck"))
    plan.steps.push(step({ check: "typecheck", provider: "rust", argv: ["cargo", "check", "--message-format=json"], parser: parseCargoCheck("typecheck") }));
  if (o.checks.includes("build"))
    plan.steps.push(step({ check: "build", provider: "rust", argv: ["cargo", "build", "--message-format=json"], parser: parseCargoCheck("build") }));
  if (o.checks.includes("test"))
    plan.steps.push(step({ check: "test", provider: "rust", argv: ["cargo", "test", "--no-fail-fast", "--message-format=json"], parser: parseCargoTest }));
}

/** The validators `project_validate` runs for this project, in check order. */
export function detect(o: DetectOptions): Plan {
  const plan: Plan = { steps: [], skipped: [], detected: [], notes: [] };
  nodeSteps(o, plan);
  pythonSteps(o, plan);
  goSteps(o, plan);
  rustSteps(o, plan);
  const runnable: Step[] = [];
  for (const s of plan.steps) {
    const capability = PROVIDER_CAPABILITY[s.provider];
    if (o.capabilities.has(capability)) runnable.push(s);
    else plan.skipped.push({ check: s.check, provider: s.provider, reason: "capability_missing", capability });
  }
  plan.steps = runnable.sort((a, b) => CHECK_ORDER[a.check] - CHECK_ORDER[b.check]);
  return plan;
}

/** `cargo_check`. */
export function cargoCheckStep(o: { package?: string; all_targets?: boolean }): Step {
  const argv = ["cargo", "check", "--message-format=json", ...(o.package ? ["-p", o.package] : []), ...(o.all_targets ? ["--all-targets"] : [])];
  return step({ check: "typecheck", provider: "rust", argv, parser: parseCargoCheck("typecheck") });
}

/** `cargo_test`. */
export function cargoTestStep(o: { package?: string; test_filter?: string }): Step {
  const argv = ["cargo", "test", "--no-fail-fast", "--message-format=json", ...(o.package ? ["-p", o.package] : []), ...(o.test_filter ? [o.test_filter] : [])];
  return step({ check: "test", provider: "rust", argv, parser: parseCargoTest });
}

/** `go_test`. */
export function goTestStep(root: string, o: { packages?: string[]; run?: string }): Step {
  const argv = ["go", "test", "-json", ...(o.run ? ["-run", o.run] : []), ...(o.packages && o.packages.length > 0 ? o.packages : ["./..."])];
  return step({ check: "test", provider: "go", argv, parser: parseGoTestJson(goModulePath(root)) });
}
