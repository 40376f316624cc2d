/**
 * Compactions: the per-tool projections a catalog row names (`projectSuccess` column), each a
 * pure function from a canonical result to a new, sparser object. A success whose facts are
 * all proven complete drops its bookkeeping; anything partial or uncertain keeps it.
 */
type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** Item facts that mark an observation as cut, partial or uncertain (any value but false). */
const INCOMPLETENESS_MARKERS = ["total_is_lower_bound", "search_errors", "outcome_unknown", "fallback", "partial"] as const;

/**
 * Whether an item, or one of the entries it lists, reports a cut, partial or unknown
 * observation. `truncated: false` is a proven fact; `truncated: null` is unknown and counts.
 */
function hasIncompleteFact(value: Json, depth = 0): boolean {
  for (const [k, v] of Object.entries(value)) {
    if ((k.endsWith("truncated") || (INCOMPLETENESS_MARKERS as readonly string[]).includes(k)) && v !== false && v !== undefined) return true;
    if (depth === 0 && Array.isArray(v) && v.some((e) => isObject(e) && hasIncompleteFact(e, depth + 1))) return true;
  }
  return false;
}

/** An item whose success is proven and whose observation is complete. */
function isCompleteSuccess(item: unknown): boolean {
  return isObject(item) && item["success"] === true && (item["error"] === null || item["error"] === undefined) && !hasIncompleteFact(item);
}

/**
 * A complete all-success batch omits each item's success/error. A partial, mixed, truncated
 * or otherwise uncertain batch (any item not proven complete) keeps every full envelope.
 */
export function compactBatch(result: Json, key: string): Json {
  const items = result[key];
  if (!Array.isArray(items) || !items.every(isCompleteSuccess)) return result;
  return { ...result, [key]: items.map(({ success: _s, error: _e, ...rest }: Json) => rest) };
}

/**
 * An edit result states each fact once. `files` is the one place for paths and revisions: per
 * file its path, its new `read_revision` (a move: under the destination; a delete: no
 * revision) and `changed: false` only for a file the call left as it was; `kind` is the
 * caller's own input. The top-level `paths` and `changed` repeated that list; `change_summary`
 * keeps only the counts no list shows (edits applied, replacements, deletions), none that is
 * zero. An applied edit also omits dry_run=false, a completed execution state and the applied
 * count. A dry run keeps its per-edit match detail; any other execution state keeps everything.
 */
export function compactEdit(result: Json): Json {
  const dry = result["dry_run"] === true;
  if (!dry && (result["dry_run"] !== false || result["execution_state"] !== "completed")) return result;
  // undo_changes reach the model as the `undo` follow-up the gateway builds from them.
  const { dry_run: _d, applied_count: _a, undo_changes: _u, execution_state: _e, paths: _p, changed: _c, change_summary, files, ...rest } = result;
  const out: Json = dry ? { dry_run: true, ...rest } : { ...rest };
  if (Array.isArray(files)) {
    out["files"] = files.flatMap((f: unknown) => {
      if (!isObject(f)) return [f];
      const { path, kind, destination, changed, replacements: _r, read_revision, ...more } = f;
      if (!dry && kind === "delete" && changed !== false) return [];
      return [
        {
          path: !dry && kind === "move" && typeof destination === "string" ? destination : path,
          ...(dry && destination !== undefined ? { destination } : {}),
          ...(read_revision !== undefined ? { read_revision } : {}),
          ...(changed === false ? { changed: false } : {}),
          ...more,
        },
      ];
    });
  }
  if (isObject(change_summary)) {
    const counts = Object.fromEntries(
      Object.entries(change_summary).filter(([k, v]) => v !== 0 && (k === "edits_applied" || k === "replacements" || k === "deleted")),
    );
    // Edits that each replaced exactly one match did what a unique-match edit says: no count to add.
    if (counts["edits_applied"] !== undefined && counts["edits_applied"] === counts["replacements"]) {
      delete counts["edits_applied"];
      delete counts["replacements"];
    }
    if (Object.keys(counts).length > 0) out["change_summary"] = counts;
  }
  return out;
}

/**
 * Any run result the model sees (run_process, run_shell, run_script and their Job's terminal
 * result): one state field and the output once. `state` goes (a completed run's cancellation
 * moves into execution_state; a timeout is `timed_out: true`); stdout and stderr go when the
 * combined `output` holds the same bytes; `effective` limits stay only when they decided the
 * outcome (the timeout of a timed-out run) — a clamp is already reported by
 * input_normalization, and a pending run's wait is in its follow-up.
 */
export function compactRun(result: Json): Json {
  if (typeof result["execution_state"] !== "string") return result;
  const out: Json = { ...result };
  const state = out["state"];
  if (state === "cancelled" && out["execution_state"] === "completed") out["execution_state"] = "cancelled";
  if (state === out["execution_state"] || state === "completed" || state === "timed_out" || state === "cancelled") delete out["state"];
  if (typeof out["output"] === "string") {
    delete out["stdout"];
    delete out["stderr"];
  }
  const effective = out["effective"];
  if (isObject(effective)) {
    if (out["timed_out"] === true && effective["timeout_ms"] !== undefined) out["effective"] = { timeout_ms: effective["timeout_ms"] };
    else delete out["effective"];
  }
  return out;
}

/** Lifecycle, Job and timing bookkeeping a proven clean synchronous exit-zero run_shell success omits. */
const SHELL_BOOKKEEPING = [
  "execution_state",
  "job_id",
  "state",
  "exit_code",
  "signal",
  "timed_out",
  "duration_ms",
  "started_at",
  "effective",
  "stdout_bytes",
  "stderr_bytes",
] as const;

/**
 * A proven clean synchronous exit-zero completion: ended by itself with code 0 within the
 * wait, its end observed (outcome_unknown absent or false), and no continuation or recovery
 * attached. Anything else (failure, timeout, pending, uncertainty, handoff) stays rich.
 */
function isCleanShellSuccess(r: Json): boolean {
  return (
    r["execution_state"] === "completed" &&
    (r["state"] === undefined || r["state"] === "completed") &&
    r["exit_code"] === 0 &&
    r["timed_out"] === false &&
    (r["signal"] === null || r["signal"] === undefined) &&
    (r["outcome_unknown"] === undefined || r["outcome_unknown"] === false) &&
    r["follow_up"] === undefined &&
    r["recovery"] === undefined
  );
}

/**
 * run_shell drops lifecycle, Job and timing bookkeeping only for a proven clean synchronous
 * exit-zero completion. It removes only named bookkeeping and empty streams: command_summary,
 * cwd, shell, nonempty output, every truncation/loss fact (false included), outcome_unknown,
 * follow_up, expectations and sidecars stay.
 */
export function compactShell(result: Json): Json {
  if (!isCleanShellSuccess(result)) return compactRun(result);
  const out: Json = { ...result };
  for (const k of SHELL_BOOKKEEPING) delete out[k];
  for (const k of ["output", "stdout", "stderr"]) if (out[k] === "") delete out[k];
  // One output field suffices when the combined stream is present.
  if (typeof out["output"] === "string") {
    delete out["stdout"];
    delete out["stderr"];
  }
  return out;
}

/** Lifecycle and timing bookkeeping a clean synchronous validation result omits (its `status` is the verdict). */
const VALIDATION_BOOKKEEPING = ["execution_state", "job_id", "state", "exit_code", "signal", "timed_out", "duration_ms", "started_at", "effective"] as const;

/**
 * project_validate, cargo_check, cargo_test, go_test: a validation run that ended by itself
 * within the wait with the validation process's own answer (a verdict, a toolchain's usage
 * error, nothing detected: no `exit_code`, which only a process that did not answer keeps)
 * drops Job bookkeeping and per-check timings; the status, checks, failures and truncation
 * facts stay. A pending, killed, timed out, crashed or uncertain run stays rich.
 */
export function compactValidation(result: Json): Json {
  const clean =
    result["execution_state"] === "completed" &&
    result["state"] === "completed" &&
    typeof result["status"] === "string" &&
    result["exit_code"] === undefined &&
    result["outcome_unknown"] === undefined &&
    result["follow_up"] === undefined;
  if (!clean) return result;
  const out: Json = { ...result };
  for (const k of VALIDATION_BOOKKEEPING) delete out[k];
  if (Array.isArray(out["checks"])) {
    out["checks"] = (out["checks"] as Json[]).map((c) => {
      const { duration_ms: _d, ...rest } = c;
      return rest;
    });
  }
  return out;
}

/**
 * A compact text rendering of a paged result for MCP text content (structuredContent keeps the
 * JSON): one header naming the columns, one line per row with its values separated by a tab
 * ("-" for an absent value), then every other field as `name: JSON`.
 */
export function pagedText(result: Readonly<Record<string, unknown>>, listField: string, columns: readonly string[]): string {
  const rows = Array.isArray(result[listField]) ? (result[listField] as Array<Record<string, unknown>>) : [];
  const cell = (v: unknown) => (v === undefined || v === null ? "-" : typeof v === "string" ? v.replace(/[\t\n]/g, " ") : JSON.stringify(v));
  const lines = [`${listField}: ${columns.join("\t")}`, ...rows.map((r) => columns.map((c) => cell(r[c])).join("\t"))];
  for (const [key, value] of Object.entries(result)) if (key !== listField) lines.push(`${key}: ${JSON.stringify(value)}`);
  return lines.join("\n");
}
