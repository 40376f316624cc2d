import { stat } from "node:fs/promises";
import { fail, PipelineStage, isToolFailureError, ReasonCode, ToolFailureError } from "@webcodex/contracts";
import { errnoCode, resolveProjectPath } from "../workspace/path-policy.js";

/** A working directory proven to lie inside the workspace. */
export interface ResolvedCwd {
  /** Real absolute path, used for spawning. */
  absolute: string;
  /** Project-relative POSIX path of the real directory, "." for the root. */
  relative: string;
}

/**
 * Resolves a request cwd with the workspace's one path policy, as for every other path a
 * model sends: project-relative only, so absolute paths (even inside the root), `..` escapes
 * and symlinks that lead out fail closed with path_outside_project, because a process started
 * outside the workspace could touch anything the Runner can. Failures name the field.
 */
export async function resolveCwd(realRoot: string, cwd: string | undefined): Promise<ResolvedCwd> {
  if (cwd === undefined) return { absolute: realRoot, relative: "." };
  const evidence = { field: "cwd", path: typeof cwd === "string" ? cwd.slice(0, 256) : "" };
  try {
    const resolved = await resolveProjectPath(realRoot, cwd, { allowRoot: true, realOnly: true });
    let isDirectory: boolean;
    try {
      isDirectory = (await stat(resolved.real)).isDirectory();
    } catch (error) {
      const code = errnoCode(error);
      if (code === "ENOENT" || code === "ENOTDIR") fail(ReasonCode.pathNotFound, PipelineStage.resolution, { evidence });
      throw error;
    }
    if (!isDirectory) fail(ReasonCode.invalidValue, PipelineStage.resolution, { detail_code: "cwd_not_a_directory", evidence });
    return { absolute: resolved.real, relative: resolved.realRel === "" ? "." : resolved.realRel };
  } catch (error) {
    if (!isToolFailureError(error)) throw error;
    // The policy's failure as is, with the field it was about.
    throw new ToolFailureError({ ...error.failure, evidence: { ...error.failure.evidence, ...evidence } });
  }
}
