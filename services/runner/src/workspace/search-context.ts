/**
 * Bounded surrounding lines for search matches, and search_file_context: the matches in one
 * file with their context and the file's read_revision, so a guarded edit can follow without
 * a separate read. The file is read once through read_files (same path policy, same
 * revision); the matching lines come from the same rg flags as search_project_texts, and
 * each is checked against the content read, so the revision is of exactly what was searched.
 */
import { FailureStage, ReasonCode, ToolFailureError, fail } from "@webcodex/contracts";
import type { PathResolver } from "./path-policy.js";
import { DEFAULT_READ_LIMITS, readFiles } from "./read-files.js";
import { fileSetArgs, forEachLine, runRg, type RgCommand } from "./ripgrep.js";
import type { SearchFileContextRequest, SearchFileContextResult, SearchMatch } from "./types.js";

/** Most lines shown on either side of a match. */
export const MAX_CONTEXT_LINES = 5;
export const DEFAULT_FILE_CONTEXT_LINES = 3;
export const DEFAULT_MAX_FILE_MATCHES = 20;
/** Files larger than this are not read whole for context (file_too_large for search_file_context). */
export const MAX_CONTEXT_FILE_BYTES = 4 * 1024 * 1024;
/** A shown line (match or context) is cut to this many characters. */
const MAX_LINE_CHARS = 500;
const COLON = 0x3a;

/** Validates context_lines (0..MAX_CONTEXT_LINES; the gateway clamps larger values first). */
export function checkContextLines(value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > MAX_CONTEXT_LINES) {
    fail(ReasonCode.invalidValue, FailureStage.preflight, { detail_code: "context_lines_out_of_range", evidence: { field: "context_lines", minimum: 0, maximum: MAX_CONTEXT_LINES } });
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
}

/** Reads a text file whole (up to MAX_CONTEXT_FILE_BYTES) with its read_revision; failures throw. */
async function readWhole(resolver: PathResolver, path: string): Promise<WholeFile> {
  const limits = { ...DEFAULT_READ_LIMITS, maxBatchBytes: MAX_CONTEXT_FILE_BYTES };
  const { items } = await readFiles(resolver, { files: [{ path }], max_bytes_per_file: MAX_CONTEXT_FILE_BYTES }, limits);
  const item = items[0];
  if (!item) throw new Error("read_files returned no item");
  if (!item.success) throw new ToolFailureError(item.error);
  if (!("content" in item)) fail(ReasonCode.binaryFile, FailureStage.preflight, { evidence: { path: item.path } });
  if (item.truncated) fail(ReasonCode.fileTooLarge, FailureStage.preflight, { evidence: { path: item.path, max_bytes: MAX_CONTEXT_FILE_BYTES } });
  const lines = item.content.split("\n").map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  return { path: item.path, read_revision: item.read_revision, lines };
}

function contextOf(lines: readonly string[], line: number, n: number): { before?: string[]; after?: string[] } {
  const before = lines.slice(Math.max(0, line - 1 - n), line - 1).map(cut);
  const after = lines.slice(line, line + n).map(cut);
  return { ...(before.length > 0 ? { before } : {}), ...(after.length > 0 ? { after } : {}) };
}

/**
 * Adds before/after lines to matches (search_project_texts with context_lines). A file that
 * cannot be read whole, or whose line no longer holds the matched text (it changed since rg
 * saw it), gets no context rather than lines of another version.
 */
export async function attachContext(resolver: PathResolver, matches: SearchMatch[], n: number): Promise<void> {
  const byPath = new Map<string, SearchMatch[]>();
  for (const m of matches) (byPath.get(m.path) ?? byPath.set(m.path, []).get(m.path) as SearchMatch[]).push(m);
  for (const [path, ms] of byPath) {
    let file: WholeFile;
    try {
      file = await readWhole(resolver, path);
    } catch (error) {
      if (error instanceof ToolFailureError) continue;
      throw error;
    }
    for (const m of ms) {
      const current = file.lines[m.line - 1];
      if (current === undefined || cut(current) !== m.text) continue;
      Object.assign(m, contextOf(file.lines, m.line, n));
    }
  }
}

/** Matching line numbers in one file, from rg with the flags search_project_texts uses. */
async function matchingLines(resolver: PathResolver, rg: RgCommand, path: string, request: SearchFileContextRequest): Promise<number[]> {
  const args = [...fileSetArgs(undefined), "--no-heading", "--with-filename", "--line-number", "--null", request.case_sensitive === false ? "--ignore-case" : "--case-sensitive"];
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
    fail(outcome.code === 2 && lines.length === 0 ? ReasonCode.invalidValue : ReasonCode.executionFailed, outcome.code === 2 && lines.length === 0 ? FailureStage.preflight : FailureStage.execution, {
      detail_code: outcome.code === 2 && lines.length === 0 ? "invalid_regex" : "rg_failed",
      evidence: { error: outcome.stderr.trim().slice(0, 500) },
    });
  }
  return lines;
}

export async function searchFileContext(resolver: PathResolver, rg: RgCommand, request: SearchFileContextRequest): Promise<SearchFileContextResult> {
  if (typeof request.pattern !== "string" || request.pattern === "") fail(ReasonCode.invalidValue, FailureStage.preflight, { detail_code: "empty_pattern" });
  if (request.pattern.includes("\n")) fail(ReasonCode.invalidValue, FailureStage.preflight, { detail_code: "pattern_contains_newline" });
  const n = checkContextLines(request.context_lines, DEFAULT_FILE_CONTEXT_LINES);
  const maxMatches = request.max_matches ?? DEFAULT_MAX_FILE_MATCHES;
  if (!Number.isInteger(maxMatches) || maxMatches < 1) fail(ReasonCode.invalidValue, FailureStage.preflight, { detail_code: "max_matches_not_positive" });
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
    return { path: file.path, read_revision: file.read_revision, total_lines: file.lines.length, match_count: lines.length, matches, truncated: lines.length > matches.length };
  }
  return fail(ReasonCode.executionFailed, FailureStage.execution, { detail_code: "file_changed_during_search", evidence: { path: request.path } });
}
