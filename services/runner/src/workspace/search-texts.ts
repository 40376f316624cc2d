/**
 * search_project_texts: independent queries run concurrently, one rg process each, output
 * stream-parsed (`--null` framing, no JSON). Every matching line is counted so `total` is exact
 * unless the counting ceiling was hit or rg did not finish (errors, a signal), which is then
 * stated as `total_is_lower_bound`. The kept
 * matches are the first max_results by (path, line), independent of rg's thread order.
 */
import { clampRule, PipelineStage, ReasonCode, ToolFailureError, fail, toolFailure } from "@webcodex/contracts";
import { BoundedSmallest } from "./bounded-smallest.js";
import type { PathResolver } from "./path-policy.js";
import { fileSetArgs, forEachLine, resolveSearchTarget, runRg, type RgCommand } from "./ripgrep.js";
import { checkContextLines, verifyMatches } from "./search-context.js";
import type { SearchMatch, SearchProjectTextsRequest, SearchProjectTextsResult, SearchQuery, SearchQueryResult, SearchQuerySuccess } from "./types.js";

export const DEFAULT_MAX_SEARCH_RESULTS = clampRule("search_project_texts", "queries.*.max_results").default;
/** Match lines counted per query before rg is stopped and the total becomes a lower bound. */
export const SEARCH_COUNT_CEILING = 100_000;
/** Returned match text is cut to this many characters. */
export const MAX_MATCH_TEXT_CHARS = 500;
/** Bytes kept per candidate line: enough for MAX_MATCH_TEXT_CHARS of any UTF-8 text. */
const KEPT_TEXT_BYTES = MAX_MATCH_TEXT_CHARS * 4;
const COLON = 0x3a;
const REGEX_ERROR = /regex parse error|error parsing regex|not allowed in a regex|regex could not be compiled|size limit/i;

export interface Candidate {
  path: string;
  line: number;
  text: Buffer;
  long: boolean;
}

const byPathThenLine = (a: Candidate, b: Candidate): number => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.line - b.line);

export async function searchProjectTexts(resolver: PathResolver, rg: RgCommand, request: SearchProjectTextsRequest): Promise<SearchProjectTextsResult> {
  const results = await Promise.all(request.queries.map((query) => runQuery(resolver, rg, query)));
  return { results };
}

async function runQuery(resolver: PathResolver, rg: RgCommand, query: SearchQuery): Promise<SearchQueryResult> {
  try {
    return await runQueryChecked(resolver, rg, query);
  } catch (error) {
    if (error instanceof ToolFailureError) return { success: false, error: error.failure };
    throw error;
  }
}

async function runQueryChecked(resolver: PathResolver, rg: RgCommand, query: SearchQuery): Promise<SearchQueryResult> {
  const maxResults = query.max_results ?? DEFAULT_MAX_SEARCH_RESULTS;
  if (typeof query.pattern !== "string" || query.pattern === "") {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "empty_pattern" });
  }
  if (query.pattern.includes("\n")) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "pattern_contains_newline" });
  }
  if (!Number.isInteger(maxResults) || maxResults < 1) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "max_results_not_positive", evidence: { max_results: maxResults } });
  }
  const output = query.output ?? "matches";
  if (output !== "matches" && output !== "files" && output !== "count") {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, {
      detail_code: "unknown_output",
      evidence: { field: "output", allowed: ["matches", "files", "count"] },
    });
  }
  const contextLines = checkContextLines(query.context_lines, 0);
  if (contextLines > 0 && output !== "matches") {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "context_lines_needs_matches", evidence: { field: "context_lines" } });
  }
  const target = await resolveSearchTarget(resolver, query.path);

  const args = [
    ...fileSetArgs(query.glob),
    "--no-heading",
    "--with-filename",
    "--line-number",
    "--null",
    query.case_sensitive === false ? "--ignore-case" : "--case-sensitive",
  ];
  if (query.regex !== true) args.push("--fixed-strings");
  args.push("--regexp", query.pattern, "--", target.arg);

  const kept = new BoundedSmallest<Candidate>(maxResults, byPathThenLine);
  let total = 0;
  let pathBytes: Buffer | null = null;
  let currentPath = "";
  let skipCurrentFile = false;
  /** Match lines per file; rg prints a file's lines together. */
  const perFile = new Map<string, number>();
  const countOnly = output !== "matches";

  const onLine = (line: Buffer): boolean => {
    const nul = line.indexOf(0);
    if (nul <= 0) return true; // e.g. "binary file matches" notices: not a match line.
    total++;
    if (pathBytes === null || pathBytes.length !== nul || pathBytes.compare(line, 0, nul) !== 0) {
      pathBytes = Buffer.from(line.subarray(0, nul));
      const raw = pathBytes.toString("utf8");
      currentPath = target.stripPrefix !== "" && raw.startsWith(target.stripPrefix) ? raw.slice(target.stripPrefix.length) : raw;
      const threshold = kept.threshold;
      skipCurrentFile = countOnly || (threshold !== undefined && currentPath > threshold.path);
    }
    perFile.set(currentPath, (perFile.get(currentPath) ?? 0) + 1);
    if (!skipCurrentFile) {
      let lineNumber = 0;
      let pos = nul + 1;
      for (; pos < line.length && line[pos] !== COLON; pos++) lineNumber = lineNumber * 10 + ((line[pos] as number) - 48);
      const text = line.subarray(pos + 1);
      kept.add({
        path: currentPath,
        line: lineNumber,
        text: Buffer.from(text.subarray(0, KEPT_TEXT_BYTES)),
        long: text.length > KEPT_TEXT_BYTES,
      });
    }
    return total < SEARCH_COUNT_CEILING;
  };
  const outcome = await runRg(rg, args, resolver.rootReal, (block) => forEachLine(block, onLine));

  // rg exits 0 with matches, 1 without, 2 on errors (possibly after partial output); any other
  // end (a signal, a lost spawn host) means it did not finish: what it printed is a part.
  const finished = outcome.stopped || outcome.code === 0 || outcome.code === 1;
  if (!finished) {
    if (total === 0 && outcome.code === 2 && REGEX_ERROR.test(outcome.stderr)) {
      fail(ReasonCode.invalidValue, PipelineStage.preflight, {
        detail_code: "invalid_regex",
        evidence: { pattern: query.pattern.slice(0, 200), error: outcome.stderr.trim().slice(0, 500) },
      });
    }
    if (total === 0) {
      throw new ToolFailureError(
        toolFailure(ReasonCode.executionFailed, PipelineStage.execution, {
          detail_code: outcome.timedOut ? "rg_timed_out" : "rg_failed",
          evidence: { stderr_tail: outcome.stderr.slice(-500), ...(outcome.signal === null ? {} : { signal: outcome.signal }) },
        }),
      );
    }
  }

  // Stopped at the counting ceiling, or rg did not finish: matches were left unseen.
  const facts = {
    ...(outcome.stopped || !finished ? { total_is_lower_bound: true as const } : {}),
    ...(!outcome.stopped && outcome.code === 2 ? { search_errors: true as const } : {}),
  };
  if (output === "count") return { success: true, error: null, match_count: total, file_count: perFile.size, ...facts };
  if (output === "files") {
    const paths = [...perFile.keys()].sort();
    const files = paths.slice(0, maxResults).map((path) => ({ path, match_count: perFile.get(path) as number }));
    return { success: true, error: null, files, file_count: paths.length, match_count: total, truncated: paths.length > files.length, ...facts };
  }
  const matches = kept.sorted().map(toMatch);
  // Revisions only from a finished count: a stopped rg leaves per-file counts short.
  const exactCounts = finished && !outcome.stopped && outcome.code !== 2;
  const fixedString = query.regex !== true && query.case_sensitive !== false && exactCounts ? query.pattern : undefined;
  const revisions = await verifyMatches(resolver, matches, { contextLines, ...(fixedString !== undefined ? { fixedString, perFile } : {}) });
  if (!exactCounts) for (const path of Object.keys(revisions)) delete revisions[path];
  const result: SearchQuerySuccess = { success: true, error: null, matches, total, truncated: total > matches.length, ...facts };
  if (Object.keys(revisions).length > 0) result.read_revisions = revisions;
  return result;
}

export function toMatch(candidate: Candidate): SearchMatch {
  let bytes = candidate.text;
  if (!candidate.long && bytes.length > 0 && bytes[bytes.length - 1] === 0x0d) bytes = bytes.subarray(0, -1);
  let text = bytes.toString("utf8");
  const match: SearchMatch = { path: candidate.path, line: candidate.line, text };
  if (candidate.long || text.length > MAX_MATCH_TEXT_CHARS) {
    let cut = MAX_MATCH_TEXT_CHARS;
    const code = text.charCodeAt(cut - 1);
    if (code >= 0xd800 && code <= 0xdbff) cut--; // do not split a surrogate pair
    text = text.slice(0, cut);
    match.text = text;
    match.text_truncated = true;
  }
  return match;
}
