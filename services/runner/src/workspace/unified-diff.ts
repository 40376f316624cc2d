/**
 * Parsers for git's machine output: unified diffs (bounded hunks) and `-z` name-status /
 * numstat listings. Hunk bodies are consumed by their declared line counts, so a content
 * line that happens to look like a header ("--- a/x") is never misread, and a body that ends
 * before its counts are used up is reported as truncated, never as a complete hunk.
 */
import type { ChangeStatus, DiffHunk, TextHunk } from "./types.js";

export interface HunkLimits {
  maxHunks: number;
  maxLinesPerHunk: number;
  maxLineChars: number;
}

export interface ParsedDiff {
  hunks: DiffHunk[];
  /** Hunks seen; a lower bound when the input was cut. */
  totalHunks: number;
}

export interface ParseOptions {
  /**
   * The producer's output was cut (e.g. at a byte cap): a partial last line is dropped and the
   * hunk open at the cut is truncated, even when its counts are used up, because a
   * "\ No newline at end of file" line or more hunks may have followed.
   */
  cut?: boolean;
}

const HUNK_HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

export function parseUnifiedDiff(text: string, limits: HunkLimits, options: ParseOptions = {}): ParsedDiff {
  const hunks: DiffHunk[] = [];
  let totalHunks = 0;
  let headerPath: string | undefined;
  let oldPath: string | null | undefined;
  let newPath: string | null | undefined;
  let hunk: TextHunk | null = null; // the hunk receiving lines, null when beyond max_hunks
  let inHunk = false;
  let oldLeft = 0;
  let newLeft = 0;

  const filePath = (): string => newPath ?? oldPath ?? headerPath ?? "";
  const push = (entry: DiffHunk): boolean => {
    totalHunks++;
    if (hunks.length >= limits.maxHunks) return false;
    hunks.push(entry);
    return true;
  };
  const addLine = (line: string): void => {
    if (hunk === null) return;
    if (hunk.lines.length >= limits.maxLinesPerHunk) {
      hunk.truncated = true;
      hunk.omitted_lines = (hunk.omitted_lines ?? 0) + 1;
      return;
    }
    if (line.length > limits.maxLineChars) {
      hunk.truncated = true;
      hunk.lines.push(line.slice(0, limits.maxLineChars));
    } else {
      hunk.lines.push(line);
    }
  };

  // The producer stopped before this hunk was complete: never present it as whole.
  const markCut = (): void => {
    if (hunk !== null) hunk.truncated = true;
  };

  const lines = text.split("\n");
  // The last element is "" after a final newline, or a partial line when the output was cut.
  if (lines[lines.length - 1] === "" || options.cut === true) lines.pop();
  for (const line of lines) {
    if (inHunk && (oldLeft > 0 || newLeft > 0)) {
      // An empty line is an empty context line (git's diff.suppressBlankEmpty).
      const marker = line === "" ? " " : line[0];
      if (marker === " " && oldLeft > 0 && newLeft > 0) {
        oldLeft--;
        newLeft--;
        addLine(line);
        continue;
      }
      if (marker === "-" && oldLeft > 0) {
        oldLeft--;
        addLine(line);
        continue;
      }
      if (marker === "+" && newLeft > 0) {
        newLeft--;
        addLine(line);
        continue;
      }
      if (marker === "\\") {
        addLine(line);
        continue;
      }
      // Not a body line although the header's counts are not used up: the body was cut short.
      // The line itself is read again below as whatever it is (a header, the next file, ...).
      markCut();
      inHunk = false;
    }
    if (line.startsWith("\\")) {
      // "\ No newline at end of file" belongs to the hunk just read.
      if (inHunk) addLine(line);
      continue;
    }
    inHunk = false;
    if (line.startsWith("diff --git ")) {
      headerPath = parseGitHeaderPath(line.slice("diff --git ".length));
      oldPath = undefined;
      newPath = undefined;
      hunk = null;
      continue;
    }
    const header = HUNK_HEADER.exec(line);
    if (header !== null) {
      const entry: TextHunk = {
        path: filePath(),
        old_start: Number(header[1]),
        old_lines: header[2] === undefined ? 1 : Number(header[2]),
        new_start: Number(header[3]),
        new_lines: header[4] === undefined ? 1 : Number(header[4]),
        header: line.length > limits.maxLineChars ? line.slice(0, limits.maxLineChars) : line,
        lines: [],
        truncated: false,
      };
      hunk = push(entry) ? entry : null;
      inHunk = true;
      oldLeft = entry.old_lines;
      newLeft = entry.new_lines;
    } else if (line.startsWith("--- ")) {
      oldPath = parseSidePath(line.slice(4), "a/");
    } else if (line.startsWith("+++ ")) {
      newPath = parseSidePath(line.slice(4), "b/");
    } else if (line.startsWith("rename from ")) {
      oldPath = unquote(line.slice("rename from ".length));
    } else if (line.startsWith("rename to ")) {
      newPath = unquote(line.slice("rename to ".length));
    } else if (line.startsWith("Binary files ") || line === "GIT binary patch") {
      push({ path: filePath(), binary: true });
    }
  }
  if (inHunk && (oldLeft > 0 || newLeft > 0 || options.cut === true)) markCut();
  return { hunks, totalHunks };
}

/** "a/P b/P" → P when both sides agree (the non-rename case); otherwise undefined. */
function parseGitHeaderPath(rest: string): string | undefined {
  if (rest.startsWith('"')) {
    const end = closingQuote(rest);
    if (end === -1) return undefined;
    const first = unquote(rest.slice(0, end + 1));
    return first.startsWith("a/") ? first.slice(2) : first;
  }
  const length = (rest.length - 5) / 2;
  if (!Number.isInteger(length) || length < 1) return undefined;
  const candidate = rest.slice(2, 2 + length);
  return rest === `a/${candidate} b/${candidate}` ? candidate : undefined;
}

/** Path of a "---"/"+++" line: null for /dev/null, prefix stripped, git's trailing tab removed. */
function parseSidePath(raw: string, prefix: string): string | null {
  const value = raw.endsWith("\t") ? raw.slice(0, -1) : raw;
  if (value === "/dev/null") return null;
  const unquoted = unquote(value);
  return unquoted.startsWith(prefix) ? unquoted.slice(prefix.length) : unquoted;
}

function closingQuote(text: string): number {
  for (let i = 1; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === '"') return i;
  }
  return -1;
}

const ESCAPES: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, "\\": 92 };

/** Undoes git's C-style quoting ("\t", "\303\251", ...) of unusual path names. */
export function unquote(text: string): string {
  if (!(text.length >= 2 && text.startsWith('"') && text.endsWith('"'))) return text;
  const bytes: number[] = [];
  const body = text.slice(1, -1);
  for (let i = 0; i < body.length; i++) {
    const ch = body[i] as string;
    if (ch !== "\\") {
      bytes.push(...Buffer.from(ch, "utf8"));
      continue;
    }
    const next = body[i + 1] ?? "";
    if (/[0-7]/.test(next)) {
      bytes.push(parseInt(body.slice(i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(ESCAPES[next] ?? next.charCodeAt(0));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

export interface NameStatusEntry {
  path: string;
  status: ChangeStatus;
  previous_path?: string;
}

/** `git diff --name-status -z` → entries; copies count as added, type changes and conflicts as modified. */
export function parseNameStatus(output: string): NameStatusEntry[] {
  const tokens = output.split("\0");
  const entries: NameStatusEntry[] = [];
  for (let i = 0; i < tokens.length;) {
    const code = tokens[i] ?? "";
    if (code === "") {
      i++;
      continue;
    }
    const letter = code[0];
    if (letter === "R" || letter === "C") {
      const previous = tokens[i + 1] ?? "";
      const path = tokens[i + 2] ?? "";
      entries.push({ path, status: letter === "R" ? "renamed" : "added", previous_path: previous });
      i += 3;
      continue;
    }
    const path = tokens[i + 1] ?? "";
    entries.push({ path, status: letter === "A" ? "added" : letter === "D" ? "deleted" : "modified" });
    i += 2;
  }
  return entries;
}

export interface NumStat {
  added?: number;
  removed?: number;
  binary: boolean;
}

/** `git diff --numstat -z` → counts by (new) path; binary files have no counts. */
export function parseNumStat(output: string): Map<string, NumStat> {
  const tokens = output.split("\0");
  const stats = new Map<string, NumStat>();
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] ?? "";
    if (token === "") continue;
    const firstTab = token.indexOf("\t");
    const secondTab = token.indexOf("\t", firstTab + 1);
    if (firstTab === -1 || secondTab === -1) continue;
    const added = token.slice(0, firstTab);
    const removed = token.slice(firstTab + 1, secondTab);
    let path = token.slice(secondTab + 1);
    if (path === "") {
      // Rename: "<a>\t<r>\t\0<old>\0<new>\0".
      path = tokens[i + 2] ?? "";
      i += 2;
    }
    stats.set(path, added === "-" ? { binary: true } : { added: Number(added), removed: Number(removed), binary: false });
  }
  return stats;
}
