/**
 * Work a request handler leaves for after its answer: it runs once the response has been handed
 * to the connection ("sent"), or once the connection closed before that ("lost"). A server opts
 * in with `answerHooks` (startServiceServer); outside such a request `afterAnswer` declines and
 * the caller acts at once.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type http from "node:http";
import type http2 from "node:http2";

export type AnswerFate = "sent" | "lost";
/** Schedules `then` for after the current request's answer; false when no request is being answered (act now). */
export type AfterAnswer = (then: (fate: AnswerFate) => void) => boolean;

interface Pending {
  fate?: AnswerFate;
  hooks: Array<(fate: AnswerFate) => void>;
}

const storage = new AsyncLocalStorage<Pending>();

/** Serves one request with `handle`; hooks registered while it is answered run when its response is sent or lost. */
export function serveWithAnswerHooks(res: http.ServerResponse | http2.Http2ServerResponse, handle: () => void): void {
  const pending: Pending = { hooks: [] };
  const settle = (fate: AnswerFate) => {
    if (pending.fate !== undefined) return;
    pending.fate = fate;
    for (const hook of pending.hooks.splice(0)) hook(fate);
  };
  // An HTTP/2 stream the caller reset still "finishes" (its response is discarded): aborted says so.
  const reset = () => "stream" in res && res.stream.aborted;
  res.once("finish", () => settle(reset() ? "lost" : "sent"));
  res.once("close", () => settle(res.writableFinished && !reset() ? "sent" : "lost"));
  storage.run(pending, handle);
}

export const afterAnswer: AfterAnswer = (then) => {
  const pending = storage.getStore();
  if (pending === undefined) return false;
  if (pending.fate !== undefined) then(pending.fate);
  else pending.hooks.push(then);
  return true;
};
