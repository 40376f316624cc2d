/**
 * edit_project_files as a transaction: every change passes preflight (paths, policy,
 * revisions, matches, overlaps) before anything is written; then each file is replaced
 * atomically (temp file in the same directory + rename, mode preserved), and if any step
 * fails, everything already applied is rolled back. Only a failed rollback reports
 * state_changed/outcome_unknown.
 *
 * import_host_files runs through the same transaction: each Host file becomes a create (or,
 * with overwrite and the current revision, a guarded whole-file replace) of raw bytes.
 *
 * The transaction's parts are their own files: what is prepared (edit-prepared.ts), preflight
 * (edit-preflight.ts), apply and rollback (edit-apply.ts), reports and undo (edit-report.ts),
 * and import_host_files (import-host-files.ts).
 */
import { apply } from "./edit-apply.js";
import { preflight } from "./edit-preflight.js";
import type { EditContext } from "./edit-prepared.js";
import { appliedReport, dryRunReport } from "./edit-report.js";
import type { EditProjectFilesRequest, EditProjectFilesResult } from "./types.js";

export type { EditContext } from "./edit-prepared.js";
export { UNDO_MAX_BYTES } from "./edit-report.js";
export { importHostFiles, IMPORT_MAX_CALL_BYTES, IMPORT_MAX_FILE_BYTES } from "./import-host-files.js";

export async function editProjectFiles(context: EditContext, request: EditProjectFilesRequest): Promise<EditProjectFilesResult> {
  const prepared = await preflight(context.resolver, request.changes);
  if (request.dry_run === true) return dryRunReport(prepared);
  await apply(context, prepared);
  return appliedReport(prepared, request.include_undo === true);
}
