/**
 * list_project_files: one `rg --files` run, counted in full but kept bounded in memory. The
 * returned paths are the first max_results of the complete sorted listing, so the answer does
 * not depend on rg's thread scheduling.
 */
import { clampRule, PipelineStage, ReasonCode, fail } from "@webcodex/contracts";
import { BoundedSmallest } from "./bounded-smallest.js";
import type { PathResolver } from "./path-policy.js";
import { fileSetArgs, resolveSearchTarget, runRg, type RgCommand } from "./ripgrep.js";
import type { ListProjectFilesRequest, ListProjectFilesResult } from "./types.js";

export const DEFAULT_MAX_LIST_RESULTS = clampRule("list_project_files", "max_results").default;

export async function listProjectFiles(resolver: PathResolver, rg: RgCommand, request: ListProjectFilesRequest): Promise<ListProjectFilesResult> {
  const maxResults = request.max_results ?? DEFAULT_MAX_LIST_RESULTS;
  if (!Number.isInteger(maxResults) || maxResults < 1) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "max_results_not_positive", evidence: { max_results: maxResults } });
  }
  const target = await resolveSearchTarget(resolver, request.path);
  const smallest = new BoundedSmallest<string>(maxResults, (a, b) => (a < b ? -1 : a > b ? 1 : 0));
  let total = 0;
  const strip = target.stripPrefix;
  const outcome = await runRg(rg, ["--files", ...fileSetArgs(request.glob), "--", target.arg], resolver.rootReal, (block) => {
    for (const line of block.toString("utf8").split("\n")) {
      total++;
      smallest.add(strip !== "" && line.startsWith(strip) ? line.slice(strip.length) : line);
    }
  });
  // 0: files listed, 1: nothing listed, 2: some errors (e.g. unreadable directories).
  if (outcome.timedOut && total === 0) {
    fail(ReasonCode.executionFailed, PipelineStage.execution, { detail_code: "rg_timed_out" });
  }
  if (!outcome.timedOut && outcome.code !== 0 && outcome.code !== 1 && !(outcome.code === 2 && total > 0)) {
    fail(ReasonCode.executionFailed, PipelineStage.execution, { detail_code: "rg_failed", evidence: { stderr_tail: outcome.stderr.slice(-500) } });
  }
  const result: ListProjectFilesResult = { paths: smallest.sorted(), total, truncated: total > maxResults };
  if (outcome.code === 2 || outcome.timedOut) result.total_is_lower_bound = true;
  return result;
}
