/**
 * Bounded surrounding lines for search matches, and search_file_context: the matches in one
 * file with their context and the file's read_revision, so a guarded edit can follow without
 * a separate read. The file is read once through read_files (same path policy, same
 * revision); the matching lines come from the same rg flags as search_project_texts, and
 * each is checked against the content read, so the revision is of exactly what was searched.
 */
import { clampRule, PipelineStage, ReasonCode, ToolFailureError, fail, toolLimit } from "@webcodex/contracts";
import type { PathResolver } from "./path-policy.js";
import { DEFAULT_READ_LIMITS, readFiles } from "./read-files.js";
import { fileSetArgs, forEachLine, runRg, type RgCommand } from "./ripgrep.js";
import type { SearchFileContextRequest, SearchFileContextResult, SearchMatch } from "./types.js";

/** Most lines shown on either side of a match. */
export const MAX_CONTEXT_LINES = clampRule("search_file_context", "context_lines").ceiling;
export const DEFAULT_FILE_CONTEXT_LINES = clampRule("search_file_context", "context_lines").default;
export const DEFAULT_MAX_FILE_MATCHES = clampRule("search_file_context", "max_matches").default;
/** Files larger than this are not read whole for context (file_too_large for search_file_context). */
export const MAX_CONTEXT_FILE_BYTES = 4 * 1024 * 1024;
/** A shown line (match or context) is cut to this many characters. */
const MAX_LINE_CHARS = 500;
const COLON = 0x3a;

/** Validates context_lines (0..MAX_CONTEXT_LINES; the gateway clamps larger values first). */
export function checkContextLines(value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > MAX_CONTEXT_LINES) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, {
      detail_code: "context_lines_out_of_range",
      evidence: { field: "context_lines", minimum: 0, maximum: MAX_CONTEXT_LINES },
    });
  }
  return value;
}

const cut = (line: string): string => {
  if (line.length <= MAX_LINE_CHARS) return line;
  const code = line.charCodeAt(MAX_LINE_CHARS - 1);
  return line.slice(0, code >= 0xd800 && code <= 0xdbff ? MAX_LINE_CHARS - 1 : MAX_LINE_CHARS);
};

interface WholeFile {
  path: string;
  read_revision: string;
  lines: string[];
  bytes: number;
}

/** Reads a text file whole (up to MAX_CONTEXT_FILE_BYTES) with its read_revision; failures throw. */
async function readWhole(resolver: PathResolver, path: string, maxBytes = MAX_CONTEXT_FILE_BYTES): Promise<WholeFile> {
  const limits = { ...DEFAULT_READ_LIMITS, maxBatchBytes: maxBytes };
  const { items } = await readFiles(resolver, { files: [{ path }], max_bytes_per_file: maxBytes }, limits);
  const item = items[0];
  if (!item) throw new Error("read_files returned no item");
  if (!item.success) throw new ToolFailureError(item.error);
  if (!("content" in item)) fail(ReasonCode.binaryFile, PipelineStage.preflight, { evidence: { path: item.path } });
  if (item.truncated) fail(ReasonCode.fileTooLarge, PipelineStage.preflight, { evidence: { path: item.path, max_bytes: maxBytes } });
  const bytes = Buffer.byteLength(item.content);
  const lines = item.content.split("\n").map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  return { path: item.path, read_revision: item.read_revision, lines, bytes };
}

function contextOf(lines: readonly string[], line: number, n: number): { before?: string[]; after?: string[] } {
  const before = lines.slice(Math.max(0, line - 1 - n), line - 1).map(cut);
  const after = lines.slice(line, line + n).map(cut);
  return { ...(before.length > 0 ? { before } : {}), ...(after.length > 0 ? { after } : {}) };
}

/** Files read whole to prove a search's matches against one revision, at most. */
export const MAX_REVISION_FILES = toolLimit("search_project_texts", "revision_files");
/** Larger files get no read_revision from a search (search_file_context or read_files give one). */
export const MAX_REVISION_FILE_BYTES = toolLimit("search_project_texts", "revision_file_bytes");

export interface VerifyOptions {
  /** Lines of context to attach (0: none). */
  contextLines: number;
  /** Set when the query is a case-sensitive fixed string: its matching lines can be recounted exactly. */
  fixedString?: string;
  /** rg's matching-line count per path, to compare with the recount. */
  perFile?: ReadonlyMap<string, number>;
}

/**
 * Reads each matched file once and checks the matches against that content: a match whose line
 * no longer holds the matched text (the file changed since rg saw it) gets no context rather
 * than lines of another version. Returns the read_revision of every file (at most
 * MAX_REVISION_FILES, each at most MAX_REVISION_FILE_BYTES) whose listed matches all hold in
 * the content read, and, for a case-sensitive fixed string, whose matching-line count equals
 * rg's: the revision a guarded edit of those lines can use without a separate read.
 */
export async function verifyMatches(resolver: PathResolver, matches: SearchMatch[], options: VerifyOptions): Promise<Record<string, string>> {
  const byPath = new Map<string, SearchMatch[]>();
  for (const m of matches) (byPath.get(m.path) ?? (byPath.set(m.path, []).get(m.path) as SearchMatch[])).push(m);
  const revisions: Record<string, string> = {};
  let revisionFiles = 0;
  for (const [path, ms] of byPath) {
    const wantRevision = revisionFiles < MAX_REVISION_FILES;
    if (!wantRevision && options.contextLines === 0) break;
    let file: WholeFile;
    try {
      file = await readWhole(resolver, path, options.contextLines > 0 ? MAX_CONTEXT_FILE_BYTES : MAX_REVISION_FILE_BYTES);
    } catch (error) {
      if (error instanceof ToolFailureError) continue;
      throw error;
    }
    let allHold = true;
    for (const m of ms) {
      const current = file.lines[m.line - 1];
      if (current === undefined || cut(current) !== m.text) {
        allHold = false;
        continue;
      }
      if (options.contextLines > 0) Object.assign(m, contextOf(file.lines, m.line, options.contextLines));
    }
    if (!wantRevision || !allHold || file.bytes > MAX_REVISION_FILE_BYTES) continue;
    if (options.fixedString !== undefined) {
      const needle = options.fixedString;
      const recount = file.lines.reduce((n, line) => n + (line.includes(needle) ? 1 : 0), 0);
      if (recount !== options.perFile?.get(path)) continue;
    }
    revisions[path] = file.read_revision;
    revisionFiles++;
  }
  return revisions;
}

/** Matching line numbers in one file, from rg with the flags search_project_texts uses. */
async function matchingLines(resolver: PathResolver, rg: RgCommand, path: string, request: SearchFileContextRequest): Promise<number[]> {
  const args = [
    ...fileSetArgs(undefined),
    "--no-heading",
    "--with-filename",
    "--line-number",
    "--null",
    request.case_sensitive === false ? "--ignore-case" : "--case-sensitive",
  ];
  if (request.regex !== true) args.push("--fixed-strings");
  args.push("--regexp", request.pattern, "--", path);
  const lines: number[] = [];
  const outcome = await runRg(rg, args, resolver.rootReal, (block) =>
    forEachLine(block, (line) => {
      const nul = line.indexOf(0);
      if (nul <= 0) return true;
      let n = 0;
      for (let pos = nul + 1; pos < line.length && line[pos] !== COLON; pos++) n = n * 10 + ((line[pos] as number) - 48);
      lines.push(n);
      return true;
    }),
  );
  if (outcome.code !== 0 && outcome.code !== 1) {
    fail(
      outcome.code === 2 && lines.length === 0 ? ReasonCode.invalidValue : ReasonCode.executionFailed,
      outcome.code === 2 && lines.length === 0 ? PipelineStage.preflight : PipelineStage.execution,
      {
        detail_code: outcome.code === 2 && lines.length === 0 ? "invalid_regex" : "rg_failed",
        evidence: { error: outcome.stderr.trim().slice(0, 500) },
      },
    );
  }
  return lines;
}

export async function searchFileContext(resolver: PathResolver, rg: RgCommand, request: SearchFileContextRequest): Promise<SearchFileContextResult> {
  if (typeof request.pattern !== "string" || request.pattern === "") fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "empty_pattern" });
  if (request.pattern.includes("\n")) fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "pattern_contains_newline" });
  const n = checkContextLines(request.context_lines, DEFAULT_FILE_CONTEXT_LINES);
  const maxMatches = request.max_matches ?? DEFAULT_MAX_FILE_MATCHES;
  if (!Number.isInteger(maxMatches) || maxMatches < 1) fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "max_matches_not_positive" });
  // Two tries: the content read and the lines rg matched must be of the same version.
  for (let attempt = 0; attempt < 2; attempt++) {
    const file = await readWhole(resolver, request.path);
    const lines = await matchingLines(resolver, rg, file.path, request);
    const consistent = lines.every((l) => l >= 1 && l <= file.lines.length);
    const again = consistent ? await readWhole(resolver, request.path) : undefined;
    if (!again || again.read_revision !== file.read_revision) continue;
    const matches = lines.slice(0, maxMatches).map((line) => {
      const text = file.lines[line - 1] as string;
      return { line, text: cut(text), ...(cut(text) !== text ? { text_truncated: true as const } : {}), ...contextOf(file.lines, line, n) };
    });
    return {
      path: file.path,
      read_revision: file.read_revision,
      total_lines: file.lines.length,
      match_count: lines.length,
      matches,
      truncated: lines.length > matches.length,
    };
  }
  return fail(ReasonCode.executionFailed, PipelineStage.execution, { detail_code: "file_changed_during_search", evidence: { path: request.path } });
}
