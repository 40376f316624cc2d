/** Work result card: the model's title and summary, changed files with +/- counts, the latest validation result, pending Jobs. */
import { el, fact, failureView, replace, startCard } from "./card-kit.js";
import type { Json } from "./card-kit.js";

void startCard("webcodex-work-result", (card, result, isError) => {
  if (isError) return replace(card.root, failureView(result));
  const input = card.input();
  const files = (result["changed_files"] ?? []) as Json[];
  const list = el("ul", undefined, { id: "files" });
  for (const f of files) {
    const item = el("li", undefined, { cls: "file" });
    item.append(
      el("span", String(f["path"]), { cls: "path", id: "file-path" }),
      el("span", ` ${String(f["status"])} `, { cls: "status" }),
      el("span", `+${String(f["added_lines"] ?? "?")}`, { cls: "added" }),
      el("span", ` -${String(f["removed_lines"] ?? "?")}`, { cls: "removed" }),
    );
    list.append(item);
  }
  const jobs = (result["pending_jobs"] ?? []) as Json[];
  const jobList = el("ul", undefined, { id: "jobs" });
  for (const j of jobs) jobList.append(el("li", `${String(j["job_id"])}: ${String(j["state"])}`, { cls: "job" }));
  const v = result["latest_validation"] as Json | undefined;
  const t = v?.["tests"] as Json | undefined;
  const d = v?.["diagnostics"] as Json | undefined;
  const counts = [
    t ? `tests ${String(t["passed"])} passed, ${String(t["failed"])} failed, ${String(t["skipped"])} skipped` : "",
    d ? `${String(d["errors"])} errors, ${String(d["warnings"])} warnings` : "",
  ]
    .filter(Boolean)
    .join("; ");
  const validation = v
    ? [
        el("h3", "Latest validation"),
        fact(String(v["tool"]), String(v["status"]), "validation-status"),
        ...(counts ? [el("div", counts, { cls: "fact", id: "validation-counts" })] : []),
      ]
    : [el("h3", "No validation result recorded", { id: "validation-none" })];
  replace(
    card.root,
    el("h2", String(input["title"] ?? "Work result"), { id: "title" }),
    el("p", String(input["summary"] ?? ""), { id: "summary" }),
    el(
      "h3",
      result["changes_unavailable"]
        ? `Changed files unavailable (${String(result["changes_unavailable"])})`
        : `Changed files (${String(result["total_changed_files"] ?? files.length)})`,
    ),
    list,
    ...validation,
    el("h3", `Pending Jobs (${jobs.length})`),
    jobList,
  );
});
