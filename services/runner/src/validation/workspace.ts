/**
 * A project's package structure, read from its files: the nearest package/module root above a
 * path, and the packages a whole-project run covers (the root plus what the workspace
 * declarations name: package.json `workspaces`, pnpm-workspace.yaml, go.work and nested go.mod,
 * Cargo.toml `[workspace] members`, Python subprojects by their pyproject.toml). Every walk is
 * bounded (depth, directories visited); the packages a call covers are capped by the caller.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import type { Dirent } from "node:fs";
import path from "node:path";

/** Files that make a directory a package (or module) root, per toolchain. */
export const PACKAGE_MARKERS = [
  "package.json",
  "tsconfig.json",
  "go.mod",
  "Cargo.toml",
  "pyproject.toml",
  "setup.py",
  "setup.cfg",
  "pytest.ini",
  "tox.ini",
] as const;

/** Directories a walk never enters: dependencies, build output, VCS and virtualenvs. */
const SKIP_DIRS = new Set(["node_modules", "target", "vendor", "dist", "build", "venv", "__pycache__", "testdata"]);
const WALK_DEPTH = 4;
const WALK_DIRS = 2_000;

function read(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** A project-relative POSIX dir ("." for the root). */
function rel(root: string, abs: string): string {
  const r = path.relative(root, abs).split(path.sep).join("/");
  return r === "" ? "." : r;
}

export function isPackageRoot(absDir: string): boolean {
  return PACKAGE_MARKERS.some((m) => existsSync(path.join(absDir, m)));
}

/**
 * The nearest package root at or above a project-relative path, and the path as seen from it
 * ("." when the path is the package itself). Undefined when no directory up to the project root
 * is one.
 */
export function nearestPackage(root: string, p: string): { dir: string; inner: string } | undefined {
  const target = path.resolve(root, p);
  let dir = isDir(target) ? target : path.dirname(target);
  for (;;) {
    const relDir = rel(root, dir);
    if (relDir.startsWith("..")) return undefined;
    if (isPackageRoot(dir)) return { dir: relDir, inner: rel(dir, target) };
    if (relDir === ".") return undefined;
    dir = path.dirname(dir);
  }
}

/** Directories under `root` (project-relative) a bounded walk reaches, breadth first. */
function walk(root: string): string[] {
  const out: string[] = [];
  let level = [root];
  for (let depth = 0; depth < WALK_DEPTH && level.length > 0 && out.length < WALK_DIRS; depth++) {
    const next: string[] = [];
    for (const dir of level) {
      let entries: Dirent[];
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      for (const e of entries) {
        if (!e.isDirectory() || e.name.startsWith(".") || SKIP_DIRS.has(e.name)) continue;
        const abs = path.join(dir, e.name);
        next.push(abs);
        out.push(abs);
        if (out.length >= WALK_DIRS) break;
      }
    }
    level = next;
  }
  return out;
}

/** A workspace glob (`packages/*`, `crates/**`, `tools/cli`) expanded to existing directories. */
export function expandGlob(root: string, pattern: string): string[] {
  const clean = pattern.replace(/^\.\//u, "").replace(/\/+$/u, "");
  if (clean === "" || clean.startsWith("/") || clean.split("/").includes("..")) return [];
  let current = [root];
  for (const seg of clean.split("/")) {
    const next: string[] = [];
    for (const dir of current) {
      if (seg === "**") {
        next.push(dir, ...walk(dir));
      } else if (/[*?[]/u.test(seg)) {
        const re = new RegExp(
          `^${seg
            .replace(/[.+^${}()|\\]/gu, "\\$&")
            .replace(/\*/gu, "[^/]*")
            .replace(/\?/gu, "[^/]")}$`,
          "u",
        );
        let entries: Dirent[] = [];
        try {
          entries = readdirSync(dir, { withFileTypes: true });
        } catch {
          /* not a directory */
        }
        for (const e of entries) if (e.isDirectory() && !e.name.startsWith(".") && !SKIP_DIRS.has(e.name) && re.test(e.name)) next.push(path.join(dir, e.name));
      } else if (isDir(path.join(dir, seg))) next.push(path.join(dir, seg));
    }
    current = next;
  }
  return current;
}

/** package.json `workspaces` (an array or `{packages}`). */
function npmWorkspaces(root: string): string[] {
  try {
    const pkg = JSON.parse(read(path.join(root, "package.json")) ?? "null") as { workspaces?: unknown } | null;
    const ws = pkg?.workspaces;
    const list = Array.isArray(ws) ? ws : Array.isArray((ws as { packages?: unknown } | undefined)?.packages) ? (ws as { packages: unknown[] }).packages : [];
    return list.filter((g): g is string => typeof g === "string");
  } catch {
    return [];
  }
}

/** pnpm-workspace.yaml's `packages:` list (negated globs excluded). */
function pnpmWorkspaces(root: string): string[] {
  const text = read(path.join(root, "pnpm-workspace.yaml"));
  if (text === undefined) return [];
  const block = /^packages:\s*\n((?:[ \t]+-.*\n?|[ \t]*#.*\n?|[ \t]*\n)*)/mu.exec(text)?.[1] ?? "";
  return [...block.matchAll(/^[ \t]+-[ \t]*['"]?([^'"#\n]+?)['"]?[ \t]*(?:#.*)?$/gmu)].map((m) => (m[1] as string).trim()).filter((g) => !g.startsWith("!"));
}

/** go.work `use` directives (single and block form). */
export function goWorkUses(root: string): string[] {
  const text = read(path.join(root, "go.work"));
  if (text === undefined) return [];
  const uses: string[] = [];
  for (const m of text.matchAll(/^use\s*\(([^)]*)\)/gmu)) for (const line of (m[1] as string).split("\n")) uses.push(line.replace(/\/\/.*$/u, "").trim());
  for (const m of text.matchAll(/^use\s+([^\s(][^\s]*)/gmu)) uses.push(m[1] as string);
  return uses.map((u) => u.replace(/^"|"$/gu, "")).filter((u) => u !== "");
}

/** Cargo.toml `[workspace]` `members = [...]`. */
export function cargoMembers(root: string): string[] | undefined {
  const text = read(path.join(root, "Cargo.toml"));
  if (text === undefined) return undefined;
  const section = /^\[workspace\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/mu.exec(text)?.[1];
  if (section === undefined) return undefined;
  const list = /^members\s*=\s*\[([\s\S]*?)\]/mu.exec(section)?.[1] ?? "";
  return [...list.matchAll(/["']([^"']+)["']/gu)].map((m) => m[1] as string);
}

/** A Cargo.toml with a `[workspace]` and no `[package]`: it has no code of its own. */
export function isVirtualCargoManifest(absDir: string): boolean {
  const text = read(path.join(absDir, "Cargo.toml"));
  return text !== undefined && /^\[workspace\]/mu.test(text) && !/^\[package\]/mu.test(text);
}

/** The `name` of a Cargo.toml's `[package]`. */
export function cargoPackageName(absDir: string): string | undefined {
  const text = read(path.join(absDir, "Cargo.toml"));
  const section = text === undefined ? undefined : /^\[package\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/mu.exec(text)?.[1];
  return section === undefined ? undefined : /^name\s*=\s*["']([^"']+)["']/mu.exec(section)?.[1];
}

/**
 * Every package a whole-project run covers, project-relative, the root (".") first when it is
 * one, then the declared and nested packages in path order.
 */
export function projectPackages(root: string): string[] {
  const found = new Set<string>();
  const add = (abs: string) => {
    const r = rel(root, abs);
    if (!r.startsWith("..") && isPackageRoot(abs)) found.add(r);
  };
  for (const g of [...npmWorkspaces(root), ...pnpmWorkspaces(root), ...(cargoMembers(root) ?? [])]) for (const d of expandGlob(root, g)) add(d);
  for (const u of goWorkUses(root)) add(path.resolve(root, u));
  // Nested Go modules and Python projects are packages by their own files, declared or not.
  for (const d of walk(root)) if (existsSync(path.join(d, "go.mod")) || existsSync(path.join(d, "pyproject.toml"))) add(d);
  const rest = [...found].filter((d) => d !== ".").sort();
  return isPackageRoot(root) ? [".", ...rest] : rest;
}

/** Whether the root package.json declares npm/yarn workspaces or a pnpm workspace exists. */
export function declaresNodeWorkspaces(root: string): boolean {
  return npmWorkspaces(root).length > 0 || pnpmWorkspaces(root).length > 0;
}

/** The Go module directories (project-relative) a whole-project go run covers. */
export function goModules(root: string): string[] {
  return projectPackages(root).filter((d) => existsSync(path.join(root, d, "go.mod")));
}

/** The outermost Cargo roots (a workspace root or a lone package), project-relative. */
export function cargoRoots(root: string): string[] {
  if (existsSync(path.join(root, "Cargo.toml"))) return ["."];
  const all = walk(root)
    .filter((d) => existsSync(path.join(d, "Cargo.toml")))
    .map((d) => rel(root, d))
    .sort();
  return all.filter((d) => !all.some((o) => o !== d && d.startsWith(`${o}/`)));
}

/** Whether `dir` (project-relative) or a crate below it is the Cargo package `name`. */
export function cargoTreeHasPackage(root: string, dir: string, name: string): boolean {
  const abs = path.resolve(root, dir);
  return [abs, ...walk(abs)].some((d) => cargoPackageName(d) === name);
}
