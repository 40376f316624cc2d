/**
 * The one place that turns a model-supplied path into a location on disk. Everything fails
 * closed: absolute paths, `..` escapes and symlinks whose real path leaves the root are
 * `path_outside_project`; writes to `.git/` internals or configured credential globs are
 * `sensitive_path`. Both are decided at failure_stage "resolution".
 *
 * The lookups (realpath, lstat) are synchronous: each is a few microseconds of metadata work
 * on the Runner's own workspace, while the asynchronous forms cost a thread-pool round trip
 * apiece on every call of every file tool.
 */
import { closeSync, constants, lstatSync, openSync, readlinkSync, realpathSync } from "node:fs";
import path from "node:path";
import { fail, PipelineStage, ReasonCode } from "@webcodex/contracts";

/** Write-refused globs used when the workspace is created without its own list. */
export const DEFAULT_SENSITIVE_WRITE_GLOBS: readonly string[] = ["**/.env", "**/.env.*", "**/*.pem", "**/id_rsa*", "**/.ssh/**"];

export interface ResolvedPath {
  /** Normalized project-relative POSIX path as requested; "" is the root. */
  rel: string;
  /** Absolute path of the entry itself: parent directories resolved, last component not followed. */
  entry: string;
  /** Absolute real path with every symlink followed (for a missing path: real nearest ancestor + rest). */
  real: string;
  /** `real` relative to the root. */
  realRel: string;
}

export interface ResolveOptions {
  /** Whether "" / "." (the root itself) is acceptable. */
  allowRoot?: boolean;
  /**
   * Reads only need the fully followed real path; writes also need the entry itself (its
   * parent resolved, the last component not followed). Skips one realpath per read.
   */
  realOnly?: boolean;
}

/** Resolves paths against one snapshot of the root's real path; create one per call. */
export interface PathResolver {
  readonly rootReal: string;
  resolve(input: string, options?: ResolveOptions): Promise<ResolvedPath>;
  /** Throws `sensitive_path` when a write to this path is refused. */
  assertWritable(resolved: ResolvedPath): void;
}

export interface PathPolicy {
  open(): Promise<PathResolver>;
  isSensitive(rel: string): boolean;
}

export function createPathPolicy(root: string, sensitiveWriteGlobs: readonly string[] = DEFAULT_SENSITIVE_WRITE_GLOBS): PathPolicy {
  const matchers = sensitiveWriteGlobs.map(globToRegExp);
  const isSensitive = (rel: string): boolean => {
    if (rel === "") return false;
    if (rel.split("/").some((segment) => segment.toLowerCase() === ".git")) return true;
    return matchers.some((matcher) => matcher.test(rel));
  };
  return {
    isSensitive,
    async open() {
      const rootReal = await realRoot(root);
      return {
        rootReal,
        resolve: (input, options) => resolveProjectPath(rootReal, input, options ?? {}),
        assertWritable(resolved) {
          if (resolved.rel === "" || isSensitive(resolved.rel) || isSensitive(resolved.realRel)) {
            fail(ReasonCode.sensitivePath, PipelineStage.resolution, {
              evidence: { path: resolved.rel },
              message: "Writes to this path are refused by the sensitive-path policy.",
            });
          }
        },
      };
    },
  };
}

/** Real path of the workspace root; a missing root is a resolution failure, not an internal error. */
export async function realRoot(root: string): Promise<string> {
  try {
    // realpath proves the root exists; a root that is not a directory fails every later read or write.
    return realpathSync.native(root);
  } catch {
    return fail(ReasonCode.pathNotFound, PipelineStage.resolution, {
      detail_code: "project_root_missing",
      message: "The workspace root does not exist.",
    });
  }
}

const OUTSIDE_MESSAGE = "Paths are relative to the project root: no leading / and no .. above it (list_project_files shows the project's paths).";

/** Lexical normalization: returns the project-relative POSIX path or fails closed. */
export function normalizeProjectPath(input: string): string {
  if (typeof input !== "string") {
    return fail(ReasonCode.invalidValue, PipelineStage.resolution, { detail_code: "path_not_string" });
  }
  if (input.includes("\0")) {
    return fail(ReasonCode.invalidValue, PipelineStage.resolution, { detail_code: "nul_in_path" });
  }
  if (input.startsWith("/")) {
    return fail(ReasonCode.pathOutsideProject, PipelineStage.resolution, {
      detail_code: "absolute_path",
      evidence: { path: input },
      message: OUTSIDE_MESSAGE,
    });
  }
  let normalized = path.posix.normalize(input === "" ? "." : input);
  while (normalized.length > 1 && normalized.endsWith("/")) normalized = normalized.slice(0, -1);
  if (normalized === ".") return "";
  if (normalized === ".." || normalized.startsWith("../")) {
    return fail(ReasonCode.pathOutsideProject, PipelineStage.resolution, {
      detail_code: "parent_escape",
      evidence: { path: input },
      message: OUTSIDE_MESSAGE,
    });
  }
  return normalized;
}

/**
 * Resolves a model-supplied path against an already real root: the one check every tool's
 * paths go through (file tools via PathResolver, the executor's cwd directly).
 */
export async function resolveProjectPath(rootReal: string, input: string, options: ResolveOptions = {}): Promise<ResolvedPath> {
  if (typeof input === "string" && input.startsWith(`${rootReal}/`) && !input.includes("\0")) {
    // An absolute path inside the project: still refused (paths are project-relative), with the path meant.
    fail(ReasonCode.pathOutsideProject, PipelineStage.resolution, {
      detail_code: "absolute_path",
      evidence: { path: input, project_path: path.posix.normalize(input.slice(rootReal.length + 1)) },
      message: "Paths are relative to the project root: retry with project_path.",
    });
  }
  const rel = normalizeProjectPath(input);
  if (rel === "") {
    if (options.allowRoot !== true) {
      fail(ReasonCode.invalidValue, PipelineStage.resolution, { detail_code: "root_not_allowed", evidence: { path: input } });
    }
    return { rel, entry: rootReal, real: rootReal, realRel: "" };
  }
  const lexical = path.join(rootReal, rel);
  const real = await realOrAncestor(lexical, rootReal, input);
  const parentReal = options.realOnly === true ? path.dirname(real) : await realOrAncestor(path.dirname(lexical), rootReal, input);
  // A read follows the whole path, so only where it ends must be inside (a directory that is a
  // symlink to the root itself is fine); a write also needs the entry's parent inside.
  for (const candidate of options.realOnly === true ? [real] : [real, parentReal]) {
    if (!isInside(rootReal, candidate)) {
      fail(ReasonCode.pathOutsideProject, PipelineStage.resolution, {
        detail_code: "symlink_escape",
        evidence: { path: rel },
      });
    }
  }
  return {
    rel,
    entry: path.join(parentReal, path.basename(lexical)),
    real,
    realRel: toPosix(path.relative(rootReal, real)),
  };
}

/**
 * Real path of `target`, or for a path that does not exist yet, the real path of its nearest
 * existing ancestor joined with the remaining components. A dangling symlink on the way cannot
 * be proven inside the root, so it fails closed.
 */
async function realOrAncestor(target: string, rootReal: string, input: string): Promise<string> {
  const rest: string[] = [];
  let current = target;
  for (;;) {
    try {
      return path.join(realpathSync.native(current), ...rest);
    } catch (error) {
      const code = errnoCode(error);
      if (code !== "ENOENT" && code !== "ENOTDIR") {
        return fail(ReasonCode.pathOutsideProject, PipelineStage.resolution, {
          detail_code: code === "ELOOP" ? "symlink_loop" : "unresolvable_path",
          evidence: { path: input },
        });
      }
      if (await existsAsEntry(current)) {
        const linkDangles = lstatSync(current).isSymbolicLink();
        if (linkDangles) {
          return fail(ReasonCode.pathOutsideProject, PipelineStage.resolution, {
            detail_code: "dangling_symlink",
            evidence: { path: input },
          });
        }
      }
    }
    const parent = path.dirname(current);
    if (parent === current || current === rootReal) {
      return fail(ReasonCode.pathOutsideProject, PipelineStage.resolution, { evidence: { path: input } });
    }
    rest.unshift(path.basename(current));
    current = parent;
  }
}

async function existsAsEntry(target: string): Promise<boolean> {
  try {
    lstatSync(target);
    return true;
  } catch {
    return false;
  }
}

/**
 * Opens an already resolved path for reading and proves, on the open descriptor, that it is
 * inside the root: the last component is opened with O_NOFOLLOW (a file swapped for a
 * symlink fails with ELOOP), and the kernel's own name for the descriptor
 * (`/proc/self/fd/N`) must lie beneath the root, so a directory on the way swapped for a
 * symlink between the check and the open cannot lead outside. Fails `path_outside_project`
 * (`symlink_swapped`) and closes the descriptor otherwise. Where `/proc/self/fd` is missing
 * (not Linux) the O_NOFOLLOW check alone holds.
 */
export function openInside(rootReal: string, real: string, rel: string, flags: number = constants.O_RDONLY): number {
  let fd: number;
  try {
    fd = openSync(real, flags | constants.O_NOFOLLOW);
  } catch (error) {
    if (errnoCode(error) === "ELOOP") swapped(rel);
    throw error;
  }
  let opened: string | undefined;
  try {
    opened = readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    opened = undefined;
  }
  if (opened !== undefined && !isInside(rootReal, opened)) {
    closeSync(fd);
    swapped(rel);
  }
  return fd;
}

/**
 * Runs `use` with a path to `target` that goes through a descriptor of its directory
 * (`/proc/self/fd/N/<name>`), opened and proven inside the root as openInside does. Every
 * operation on that path (create a temp file, rename over, link) happens in that very
 * directory, even if a directory on the way is swapped for a symlink meanwhile.
 */
export async function withPinnedParent<T>(rootReal: string, target: string, rel: string, use: (pinned: string) => Promise<T>): Promise<T> {
  let fd: number;
  try {
    fd = openInside(rootReal, path.dirname(target), rel, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (error) {
    // No /proc (not Linux): the checked path is all there is.
    if (errnoCode(error) === "ENOENT" && !procFdAvailable()) return use(target);
    throw error;
  }
  try {
    return await use(`/proc/self/fd/${fd}/${path.basename(target)}`);
  } finally {
    closeSync(fd);
  }
}

function procFdAvailable(): boolean {
  try {
    lstatSync("/proc/self/fd");
    return true;
  } catch {
    return false;
  }
}

function swapped(rel: string): never {
  return fail(ReasonCode.pathOutsideProject, PipelineStage.resolution, { detail_code: "symlink_swapped", evidence: { path: rel } });
}

export function isInside(rootReal: string, candidate: string): boolean {
  if (candidate === rootReal) return true;
  const prefix = rootReal.endsWith("/") ? rootReal : rootReal + "/";
  return candidate.startsWith(prefix);
}

function toPosix(p: string): string {
  return path.sep === "/" ? p : p.split(path.sep).join("/");
}

export function errnoCode(error: unknown): string | undefined {
  if (typeof error === "object" && error !== null && "code" in error) {
    const code = (error as { code: unknown }).code;
    return typeof code === "string" ? code : undefined;
  }
  return undefined;
}

/**
 * Minimal glob → RegExp for the sensitive-path list: `**` spans directories, `*` and `?` stay
 * within one segment (and match dot files), `[...]` and `{a,b}` work as usual. A glob without
 * "/" matches the basename at any depth, like .gitignore. Matching ignores case: on a
 * case-insensitive filesystem (or to a tool that folds case) `.ENV` is `.env`, so refusing
 * one and not the other would be no policy at all.
 */
export function globToRegExp(glob: string): RegExp {
  const source = glob.includes("/") ? glob.replace(/^\//, "") : `**/${glob}`;
  let out = "";
  let braceDepth = 0;
  for (let i = 0; i < source.length; i++) {
    const ch = source[i] as string;
    if (ch === "*") {
      if (source[i + 1] === "*") {
        const atSegmentStart = i === 0 || source[i - 1] === "/";
        if (atSegmentStart && source[i + 2] === "/") {
          out += "(?:.*/)?";
          i += 2;
        } else {
          out += ".*";
          i += 1;
        }
      } else {
        out += "[^/]*";
      }
    } else if (ch === "?") {
      out += "[^/]";
    } else if (ch === "[") {
      const close = source.indexOf("]", i + 2);
      if (close === -1) {
        out += "\\[";
      } else {
        let body = source.slice(i + 1, close);
        if (body.startsWith("!")) body = "^" + body.slice(1);
        out += `[${body.replace(/\\/g, "\\\\")}]`;
        i = close;
      }
    } else if (ch === "{") {
      braceDepth++;
      out += "(?:";
    } else if (ch === "}" && braceDepth > 0) {
      braceDepth--;
      out += ")";
    } else if (ch === "," && braceDepth > 0) {
      out += "|";
    } else if (ch === "/" && source.slice(i + 1) === "**") {
      // "dir/**" matches the directory itself and everything below it.
      out += "(?:/.*)?";
      i += 2;
    } else {
      out += ch.replace(/[.+^$()|\\]/g, "\\$&");
    }
  }
  return new RegExp(`^${out}$`, "i");
}
