/**
 * Plans that follow a project's package structure: project_validate per package (each path's
 * nearest package, or the root and its workspace members), go_test per Go module and cargo_*
 * per Cargo root. Each step carries the package directory it runs in; at most MAX_PACKAGES
 * packages per call, the rest listed as skipped.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { detect, goTestStep } from "./detect.js";
import type { DetectOptions, Plan, Step } from "./detect.js";
import { CHECK_ORDER } from "./types.js";
import { cargoRoots, cargoTreeHasPackage, goModules, nearestPackage, projectPackages } from "./workspace.js";

/** Packages one project_validate, go_test or cargo_* call runs in at most; the rest are listed as skipped. */
export const MAX_PACKAGES = 8;

/** Tags a package's plan with its directory and merges it into the whole run's. */
function mergePackage(into: Plan, dir: string, part: Plan): void {
  const prefix = (f: string) => (dir === "." ? f : path.posix.join(dir, f));
  into.steps.push(...part.steps.map((s) => ({ ...s, dir })));
  into.skipped.push(...part.skipped.map((s) => ({ package: dir, ...s })));
  into.detected.push(...part.detected.map(prefix));
  into.notes.push(...part.notes);
}

/** Names each step's and skip's package only when the run covers a package other than the root. */
function labelPackages(plan: Plan, limited: readonly string[]): Plan {
  const multi = plan.steps.some((s) => (s.dir ?? ".") !== ".") || plan.skipped.some((s) => s.package !== undefined && s.package !== ".");
  plan.steps = plan.steps.map((s) => {
    const { package: _p, ...rest } = s;
    return multi ? { ...rest, package: s.dir ?? "." } : rest;
  });
  plan.skipped = plan.skipped.map((s) => {
    const { package: p, ...rest } = s;
    return multi && p !== undefined ? { package: p, ...rest } : rest;
  });
  for (const dir of limited) plan.skipped.push({ package: dir, reason: "package_limit" });
  if (limited.length > 0) plan.notes.push(`package_limit: ${MAX_PACKAGES} packages per call; pass paths to validate the skipped ones`);
  return plan;
}

/**
 * project_validate's plan: with `paths`, each path's nearest package root (upwards from the
 * path) runs with the path narrowed to it; without, the project's packages (the root and the
 * workspace members) each run in their own directory. At most MAX_PACKAGES packages.
 */
export function detectProject(o: DetectOptions): Plan {
  const root = o.root;
  const groups = new Map<string, string[]>();
  if (o.paths.length > 0) {
    for (const p of o.paths) {
      const near = nearestPackage(root, p) ?? { dir: ".", inner: p };
      const inner = groups.get(near.dir) ?? [];
      // The package itself: the whole package, no narrowing.
      groups.set(near.dir, near.inner === "." || inner.includes(".") ? ["."] : [...inner, near.inner]);
    }
  } else {
    const packages = projectPackages(root);
    for (const dir of packages.length > 0 ? packages : ["."]) groups.set(dir, ["."]);
  }
  const dirs = [...groups.keys()];
  const members = dirs.filter((d) => d !== ".");
  const plan: Plan = { steps: [], skipped: [], detected: [], notes: [] };
  for (const dir of dirs.slice(0, MAX_PACKAGES)) {
    const inner = (groups.get(dir) ?? []).filter((p) => p !== ".");
    const part = detect({
      ...o,
      root: path.resolve(root, dir),
      projectRoot: root,
      paths: inner,
      inheritConfig: o.paths.length > 0,
      ...(dir === "." && o.paths.length === 0 && members.length > 0 ? { workspaceRoot: { members } } : {}),
    });
    mergePackage(plan, dir, part);
  }
  const ordered = labelPackages(plan, dirs.slice(MAX_PACKAGES));
  ordered.steps.sort((a, b) => CHECK_ORDER[a.check] - CHECK_ORDER[b.check]);
  ordered.notes = [...new Set(ordered.notes)];
  return ordered;
}

/** The directory part of a go package pattern (`./a/b/...` → `a/b`; `./...` → `.`), or undefined for an import path. */
function patternDir(pattern: string): string | undefined {
  if (pattern !== "." && !pattern.startsWith("./") && pattern !== "...") return undefined;
  const d = pattern
    .replace(/^\.\/?/u, "")
    .replace(/(^|\/)\.\.\.$/u, "")
    .replace(/\/+$/u, "");
  return d === "" ? "." : d;
}

/**
 * go_test's plan: each package pattern runs in the Go module that holds its directory (the
 * nearest go.mod upwards), rewritten relative to it; `./...` at a root without a go.mod covers
 * every module (go.work members and nested go.mod). Import paths and patterns no module holds
 * run at the root, where go reports them.
 */
export function goTestPlan(root: string, o: { packages?: string[]; run?: string }): Plan {
  const byModule = new Map<string, string[]>();
  const add = (dir: string, pattern: string) => byModule.set(dir, [...(byModule.get(dir) ?? []), pattern]);
  const rootModule = existsSync(path.join(root, "go.mod"));
  for (const pattern of o.packages && o.packages.length > 0 ? o.packages : ["./..."]) {
    const dir = patternDir(pattern);
    if (dir === undefined || rootModule) {
      add(".", pattern);
      continue;
    }
    let mod: string | undefined;
    for (let d = dir; ; d = path.posix.dirname(d)) {
      if (existsSync(path.join(root, d, "go.mod"))) {
        mod = d;
        break;
      }
      if (d === "." || d === "/" || d === "") break;
    }
    if (mod !== undefined) {
      const inner = path.posix.relative(mod === "." ? "" : mod, dir === "." ? "" : dir);
      const recursive = pattern.endsWith("...");
      add(mod, inner === "" ? (recursive ? "./..." : ".") : recursive ? `./${inner}/...` : `./${inner}`);
    } else if (dir === ".") {
      const modules = goModules(root);
      if (modules.length === 0) add(".", pattern);
      for (const m of modules) add(m, "./...");
    } else add(".", pattern);
  }
  const plan: Plan = { steps: [], skipped: [], detected: [], notes: [] };
  const dirs = [...byModule.keys()];
  for (const dir of dirs.slice(0, MAX_PACKAGES)) {
    const abs = path.resolve(root, dir);
    const s = goTestStep(abs, { packages: byModule.get(dir) ?? [], ...(o.run ? { run: o.run } : {}) });
    plan.steps.push({ ...s, dir });
  }
  return labelPackages(plan, dirs.slice(MAX_PACKAGES));
}

/**
 * cargo_check / cargo_test's plan: run where Cargo's root is (the project root when it has a
 * Cargo.toml, else each outermost Cargo workspace or package below it; with `package`, only
 * those holding that package).
 */
export function cargoPlan(root: string, make: () => Step, pkg: string | undefined): Plan {
  let dirs = cargoRoots(root);
  if (dirs.length > 1 && pkg !== undefined) {
    const holding = dirs.filter((d) => cargoTreeHasPackage(root, d, pkg));
    if (holding.length > 0) dirs = holding;
  }
  if (dirs.length === 0) dirs = ["."];
  const plan: Plan = { steps: dirs.slice(0, MAX_PACKAGES).map((dir) => ({ ...make(), dir })), skipped: [], detected: [], notes: [] };
  return labelPackages(plan, dirs.slice(MAX_PACKAGES));
}
