/**
 * The tools whose writes go through the Runner's write journal: a call cut off by a Runner crash
 * is finished by the Runner's start-up recovery (rolled back or completed) and named by its
 * call_id. The Runner journals exactly these; the gateway points an outcome-unknown failure of
 * one of them at that recovery. This list is the one owner of that fact.
 */
import type { RunnerToolName } from "./tool-names.js";

export const JOURNALED_TOOLS = ["edit_project_files", "import_host_files"] as const satisfies readonly RunnerToolName[];
export type JournaledToolName = (typeof JOURNALED_TOOLS)[number];

/** Whether a tool's writes go through the Runner's write journal. */
export function isJournaledTool(name: string): name is JournaledToolName {
  return (JOURNALED_TOOLS as readonly string[]).includes(name);
}
