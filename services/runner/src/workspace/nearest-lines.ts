/**
 * Where an old_text that matched nowhere was probably meant: the current lines most like it,
 * so a model can correct its edit without another read. Bounded in lines scanned, excerpts
 * and bytes; a file with nothing alike yields none.
 */

/** Excerpts listed in a match_not_found failure, and the text bytes all of them may hold. */
export const NEAREST_EXCERPTS = 3;
export const NEAREST_EXCERPT_BYTES = 2 * 1024;
/** Lines of the file compared (a larger file is compared up to here). */
const MAX_SCANNED_LINES = 20_000;
/** The lowest similarity (0..1) listed: below it a line is not "near". */
const MIN_SIMILARITY = 0.5;

export interface NearestExcerpt {
  /** 1-based line of the excerpt's first line. */
  start_line: number;
  /** The current lines there, as many as old_text has (at most 12). */
  text: string;
}

const squash = (line: string): string => line.trim().replace(/\s+/g, " ");
const tokens = (line: string): Set<string> => new Set(line.match(/[A-Za-z0-9_$]+|[^\sA-Za-z0-9_$]/g) ?? []);

/** Similarity of two lines: 1 when equal but for whitespace, else the share of tokens they have in common (Dice). */
function similarity(probe: string, probeTokens: Set<string>, line: string): number {
  const squashed = squash(line);
  if (squashed === "") return 0;
  if (squashed === probe) return 1;
  const other = tokens(squashed);
  let shared = 0;
  for (const t of probeTokens) if (other.has(t)) shared++;
  return (2 * shared) / (probeTokens.size + other.size);
}

/**
 * The excerpts of `text` most like `oldText`, best first: each starts at a line like
 * old_text's first non-blank line and spans as many lines as old_text.
 */
export function nearestLines(text: string, oldText: string): NearestExcerpt[] {
  const oldLines = oldText.split("\n");
  const skip = oldLines.findIndex((l) => squash(l) !== "");
  if (skip === -1) return [];
  const probe = squash(oldLines[skip] as string);
  const probeTokens = tokens(probe);
  const span = Math.min(12, oldLines.length - skip);
  const lines = text.split("\n");
  const scored: Array<{ index: number; score: number }> = [];
  for (let i = 0; i < Math.min(lines.length, MAX_SCANNED_LINES); i++) {
    const score = similarity(probe, probeTokens, lines[i] as string);
    if (score >= MIN_SIMILARITY) scored.push({ index: i, score });
  }
  scored.sort((a, b) => b.score - a.score || a.index - b.index);
  const excerpts: NearestExcerpt[] = [];
  let budget = NEAREST_EXCERPT_BYTES;
  for (const { index } of scored) {
    if (excerpts.length >= NEAREST_EXCERPTS) break;
    if (excerpts.some((e) => Math.abs(e.start_line - 1 - index) < span)) continue;
    const excerpt = lines.slice(index, index + span).join("\n");
    const bytes = Buffer.byteLength(excerpt);
    if (bytes > budget) continue;
    budget -= bytes;
    excerpts.push({ start_line: index + 1, text: excerpt });
  }
  return excerpts;
}
