/**
 * The shape of a follow-up call (what a failure or a pending result carries). Only the
 * builders in follow-up.ts make one; this file holds the type alone so failures and
 * projections can name it without depending on the catalog.
 */
export type FollowUpKind = "mechanically_followable" | "fallback_recovery";

export interface FollowUp {
  follow_up_kind: FollowUpKind;
  tool: string;
  arguments: Record<string, unknown>;
}
