import { realpath, stat } from "node:fs/promises";
import path from "node:path";
import { fail, FailureStage, ReasonCode } from "@webcodex/contracts";

/** A working directory proven to lie inside the workspace. */
export interface ResolvedCwd {
  /** Real absolute path, used for spawning. */
  absolute: string;
  /** Project-relative POSIX path, "." for the root. */
  relative: string;
}

function isInside(root: string, candidate: string): boolean {
  const rel = path.relative(root, candidate);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

function outside(cwd: string): never {
  return fail(ReasonCode.pathOutsideProject, FailureStage.preflight, {
    evidence: { field: "cwd", path: cwd.slice(0, 256) },
    message: "cwd must stay inside the project.",
  });
}

/**
 * Resolves a request cwd against the workspace root. Fails closed with path_outside_project
 * for `..` escapes, absolute paths outside the root and symlinks that lead out, because a
 * process started outside the workspace could touch anything the Runner can. The check is
 * done twice: lexically (so a missing outside path is still "outside", not "not found") and
 * on the real path (so symlinks cannot smuggle the process out).
 */
export async function resolveCwd(realRoot: string, cwd: string | undefined): Promise<ResolvedCwd> {
  if (cwd === undefined || cwd === "" || cwd === ".") return { absolute: realRoot, relative: "." };
  if (typeof cwd !== "string" || cwd.includes("\0")) {
    fail(ReasonCode.invalidValue, FailureStage.preflight, { detail_code: "cwd_invalid", evidence: { field: "cwd" } });
  }
  const lexical = path.resolve(realRoot, cwd);
  if (!isInside(realRoot, lexical)) outside(cwd);

  let real: string;
  try {
    real = await realpath(lexical);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      fail(ReasonCode.pathNotFound, FailureStage.preflight, { evidence: { field: "cwd", path: cwd.slice(0, 256) } });
    }
    throw error;
  }
  if (!isInside(realRoot, real)) outside(cwd);

  if (!(await stat(real)).isDirectory()) {
    fail(ReasonCode.invalidValue, FailureStage.preflight, {
      detail_code: "cwd_not_a_directory",
      evidence: { field: "cwd", path: cwd.slice(0, 256) },
    });
  }
  const relative = path.relative(realRoot, real).split(path.sep).join("/");
  return { absolute: real, relative: relative === "" ? "." : relative };
}
