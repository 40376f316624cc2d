/**
 * The one paging shape of list-shaped results (list_projects, list_agent_tasks): a bounded
 * page, `omitted` (how many more the listing holds after this page) and `next_cursor` (pass it
 * as `cursor` for the next page), both absent on a complete page. A cursor is opaque to the
 * caller; one that is not exactly as a page returned it, or no longer valid, is a structured
 * invalid_value failure (`cursor_invalid` / `cursor_expired`) whose follow-up restarts the
 * listing from its first page. A paged result's MCP text content is `pagedText` (compaction.ts).
 */
import { ReasonCode, toolFailure } from "./failure.js";
import type { ToolFailure } from "./failure.js";
import { restartListFollowUp } from "./follow-up.js";
import type { PagedTool } from "./follow-up.js";
import { PipelineStage } from "./pipeline.js";

export type { PagedTool } from "./follow-up.js";

/** The page fields of a result: present only when the page is cut. */
export function pageFields(omitted: number, nextCursor: string | undefined): { omitted?: number; next_cursor?: string } {
  return omitted > 0 && nextCursor !== undefined ? { omitted, next_cursor: nextCursor } : {};
}

const CURSOR_PREFIX = "c1.";

/** An opaque cursor of `kind` carrying `payload` (JSON). */
export function encodeCursor(kind: string, payload: unknown): string {
  return CURSOR_PREFIX + Buffer.from(JSON.stringify([kind, payload]), "utf8").toString("base64url");
}

/** The payload of a cursor of `kind`, or undefined when it is not one (tampered, another listing's, garbage). */
export function decodeCursor(kind: string, cursor: string): unknown {
  if (!cursor.startsWith(CURSOR_PREFIX) || cursor.length > 1024) return undefined;
  try {
    const decoded: unknown = JSON.parse(Buffer.from(cursor.slice(CURSOR_PREFIX.length), "base64url").toString("utf8"));
    if (!Array.isArray(decoded) || decoded.length !== 2 || decoded[0] !== kind) return undefined;
    return decoded[1];
  } catch {
    return undefined;
  }
}

/**
 * A cursor that cannot continue: invalid (not exactly as a page returned it, or another
 * listing's) or expired (its snapshot is gone). Nothing was listed; the follow-up restarts the
 * listing with `restart` (the filters the cursor belonged to, without the cursor).
 */
export function cursorFailure(detail: "cursor_invalid" | "cursor_expired", tool: PagedTool, restart: Record<string, unknown>): ToolFailure {
  return toolFailure(ReasonCode.invalidValue, PipelineStage.preflight, {
    detail_code: detail,
    evidence: { field: "/cursor" },
    message:
      detail === "cursor_expired"
        ? "This cursor expired; list again from the first page."
        : "Pass next_cursor exactly as the previous page returned it, or list again from the first page.",
    follow_up: restartListFollowUp(tool, restart),
  });
}
