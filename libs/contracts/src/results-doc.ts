/**
 * Renders docs/results.md, the results-and-failures reference, from the code that decides
 * them: each tool's result fields (ToolDefinition.resultFields), the pending shape and its
 * follow-up (the named builders), and every reason code with its stages, retry posture and
 * follow-up (reasonCodeTable). A test compares the committed file with this output.
 */
import { toolDefinitions, toolLimit } from "./catalog.js";
import { toolRoute } from "./admission.js";
import { ReasonCode, toolFailure } from "./failure.js";
import { PipelineStage } from "./pipeline.js";
import { followUpBuilders, followUpTarget, rereadFollowUp, waitForJobFollowUp } from "./follow-up.js";
import type { FollowUp } from "./follow-up.js";
import { reasonCodeTable } from "./reason-codes.js";
import type { FollowUpBuilderName, RetryPosture } from "./reason-codes.js";
import type { ToolDefinition } from "./tool-definition.js";

const RETRY: Record<RetryPosture, string> = {
  same_call: "yes, the same call (nothing ran)",
  change_first: "not unchanged: change the input first",
  inspect_first: "inspect first: the effect may have happened",
  no: "no",
};

/** The tool a builder's follow-up finally runs, its kind, and how it is called. */
/** The calls a builder makes, one per distinct target tool across its samples (a restart names the listing it restarts). */
function followUpsOf(name: FollowUpBuilderName): Array<{ target: string; kind: string; via: string }> {
  const entry = followUpBuilders[name] as { build: (...a: unknown[]) => FollowUp; samples: readonly unknown[][] };
  const out = new Map<string, { target: string; kind: string; via: string }>();
  for (const sample of entry.samples) {
    const f = entry.build(...sample);
    const target = followUpTarget(f).tool;
    if (!out.has(target)) out.set(target, { target, kind: f.follow_up_kind, via: f.tool === "call_runtime_tool" ? "call_runtime_tool" : "direct" });
  }
  return [...out.values()];
}

const pends = (d: ToolDefinition): boolean => d.inputSchema.properties?.["wait_ms"] !== undefined && d.execution === "runner";

export function renderResultsDoc(): string {
  const defs = toolDefinitions().filter((d) => d.implemented);
  const pending = { execution_state: "pending", job_id: "job_1", follow_up: waitForJobFollowUp("~p1", "job_1") };
  const failure = toolFailure(ReasonCode.staleReadRevision, PipelineStage.preflight, {
    evidence: {
      path: "src/a.ts",
      current_read_revision: "r_0123456789abcdef",
      anchors: [{ edit_index: 0, match_count: 1, excerpts: [{ start_line: 11, text: "const x = 1;\nconst y = old(x);\nreturn y;\n", match_lines: [12] }] }],
    },
    follow_up: rereadFollowUp("~p1", "src/a.ts"),
  });
  const lines = [
    "# Results and failures reference",
    "",
    "Generated from the code (`renderResultsDoc()` in `libs/contracts`) by `make docs`.",
    "Do not edit by hand: a test fails when this file is stale.",
    "",
    "## Shapes every tool shares",
    "",
    "**Success** is sparse: only the fields listed for the tool below, and only those that say",
    "something (a complete batch omits per-item `success`/`error`; a clean exit-zero `run_shell`",
    "omits lifecycle bookkeeping). The gateway may add, to any success:",
    "",
    "- `input_normalization: {code, hint, effective?}` when it rewrote or clamped an argument;",
    "- `job_attention: {items: [{job_id, state, exit_code?, outcome_unknown?}]}` once, on the first",
    "  result for a project after a Job you started there ended;",
    "- `follow_up` on a pending run (below).",
    "",
    "An `edit_project_files` result states each fact once: `files` lists, per file, its path (a",
    "move's destination) and new `read_revision`, with `changed: false` only on a file the call left",
    "as it was (a delete has no entry); `change_summary` holds only the counts no list shows",
    "(`edits_applied` and `replacements` when an edit replaced more than one match, `deleted`), none",
    "that is zero.",
    "",
    "With `include_undo: true`, an applied `edit_project_files` carries `undo`: the exact inverse of",
    "the call as one `fallback_recovery` call to `edit_project_files` (itself with `include_undo`),",
    "guarded by the revisions the edit produced",
    "(after a later change it fails as stale and writes nothing). It is absent when the change has no",
    "exact inverse (an edit that only deleted text, a large or binary delete) or the inverse exceeds",
    `${toolLimit("edit_project_files", "undo_max_bytes") / 1024} KiB; the git review tools still show the change.`,
    "",
    "`search_project_texts` (matches output) carries, per query, `read_revisions`: the",
    "`read_revision` of each matched file whose listed matches were checked against that exact",
    "content, so a guarded edit can follow the search without a read. A path absent there was not",
    `proven (changed while searched, larger than ${toolLimit("search_project_texts", "revision_file_bytes") / (1024 * 1024)} MiB, or past the first ${toolLimit("search_project_texts", "revision_files")} files).`,
    "",
    "**Pending**: a run still going at `wait_ms` returns its Job and exactly one mechanically",
    "followable follow-up that waits for it:",
    "",
    "```json",
    JSON.stringify(pending),
    "```",
    "",
    "**Failure** (`isError: true`): `reason_code`, `failure_stage`, `detail_code?`, `state_changed`,",
    "`outcome_unknown`, `evidence?`, `message?` and, when the repair is known, one `follow_up`. A",
    "stale `read_revision` on an edit is its own re-read: `evidence` holds the current revision and,",
    "per edit, where its `old_text` occurs now with the lines around it (overlapping or adjacent",
    "excerpts merged so each line appears once, `match_lines` marking the lines a match covers;",
    "bounded, `anchors_truncated` when cut). If they still show what you meant to change, retry with `current_read_revision`;",
    "otherwise run the follow-up re-read:",
    "",
    "```json",
    JSON.stringify(failure),
    "```",
    "",
    "## Follow-ups",
    "",
    "`follow_up_kind` is `mechanically_followable` (the server already chose this exact call: run it)",
    "or `fallback_recovery` (run it only to recover or expand detail). Run a follow-up exactly as",
    "returned: its `tool` with its `arguments`. A follow-up to a tool listed in `tools/list` names",
    "it directly; a follow-up to any other tool is already the `call_runtime_tool` wrapper",
    '`{tool: "call_runtime_tool", arguments: {tool, arguments}}`, so a Host that only knows',
    "`tools/list` can run it unchanged.",
    "",
    "## Results per tool",
    "",
    "| tool | route | success fields | pending |",
    "|---|---|---|---|",
    ...defs.map((d) => {
      const fields = d.resultFields === undefined ? "the result of the tool it runs" : d.resultFields.map((f) => `\`${f}\``).join(", ");
      return `| \`${d.name}\` | ${toolRoute(d).primary} | ${fields} | ${pends(d) ? "yes: `execution_state`, `job_id`, `follow_up`" : "no"} |`;
    }),
    "",
    "Every tool can fail with the shape above; the reason codes follow.",
    "",
    "## Reason codes",
    "",
    "| reason_code | stages | retry | follow-up | when there is none |",
    "|---|---|---|---|---|",
    ...Object.entries(reasonCodeTable).map(([code, row]) => {
      const ups = [
        ...(row.follow_up ? [row.follow_up] : []).map((b) => ({ detail: "", b })),
        ...Object.entries(row.detail_follow_ups ?? {}).map(([detail, b]) => ({ detail, b })),
      ].map(({ detail, b }) => {
        const calls = followUpsOf(b).map((f) => `\`${f.target}\` (${f.kind}${f.via === "call_runtime_tool" ? ", via call_runtime_tool" : ""})`);
        return `${detail ? `${detail}: ` : ""}${calls.join(" or ")}`;
      });
      return `| \`${code}\` | ${row.stages.join(", ")} | ${RETRY[row.retry]} | ${ups.join("; ") || "none"} | ${row.no_follow_up ?? ""} |`;
    }),
    "",
  ];
  return lines.join("\n");
}
