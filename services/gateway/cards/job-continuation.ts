/**
 * Job continuation card: shows the Job's live state; when the Job ends it sends exactly one
 * ui/message asking the Host for a fresh turn with the exact wait_for_job_terminal call.
 * The message is claimed on the server before it is sent, and the Host's answer is recorded;
 * a claimed or uncertain dispatch is never sent again (not by this card, nor by a remount).
 */
import { continuationFacts, continuationMessage, dispatchContinuation, el, fact, failureView, pollAgain, replace, startCard } from "./card-kit.js";
import type { Card, ContinuationRecord, Json } from "./card-kit.js";

let dispatching = false;

function render(card: Card, view: Json): void {
  const exit = typeof view["exit_code"] === "number" ? String(view["exit_code"]) : "—";
  replace(
    card.root,
    el("h2", `Job ${String(view["job_id"])}`),
    fact("state", String(view["state"]), "state"),
    fact("exit code", exit, "exit-code"),
    ...continuationFacts(view),
  );
}

function message(view: Json): string {
  const exit = typeof view["exit_code"] === "number" ? `, exit code ${String(view["exit_code"])}` : "";
  return continuationMessage(`Job ${String(view["job_id"])} ended (${String(view["state"])}${exit}).`, view);
}

async function advance(card: Card, view: Json): Promise<void> {
  render(card, view);
  const record: ContinuationRecord = {
    card,
    read: "read_job_continuation",
    update: "update_job_continuation",
    target: { project: view["project"], job_id: view["job_id"] },
    render: (v) => render(card, v),
  };
  if (view["terminal"] !== true) return pollAgain(record, (v) => advance(card, v), view);
  if ((view["continuation"] as Json)["dispatch"] !== "none" || dispatching) return;
  dispatching = true;
  await dispatchContinuation(record, () => message(view));
}

void startCard("webcodex-job-continuation", (card, result, isError) => {
  if (isError) return replace(card.root, failureView(result));
  void advance(card, result);
});
