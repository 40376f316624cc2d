/** Messages between the gateway and a Code Mode sandbox worker (structured-clone plain data only). */

/** Starts one cell in an idle worker. */
export interface CellRunRequest {
  type: "run";
  code: string;
  /** The cell's budget in ms, counted from when its VM starts (a cold worker's start is not the cell's). */
  timeoutMs: number;
  memoryBytes: number;
  textBytes: number;
}

/** The answer to one child call: a JSON envelope `{ok: true, result}` or `{ok: false, failure}`. */
export interface ChildAnswer {
  type: "answer";
  id: number;
  envelope: string;
}

export type ParentMessage = CellRunRequest | ChildAnswer;

/** A child call the cell made: tool name and JSON arguments as the cell wrote them. */
export interface ChildCall {
  type: "call";
  id: number;
  name: string;
  args: string;
}

/** How a cell ended: ok, or why not (threw, timeout, memory, stack, crashed). */
export interface CellDone {
  type: "done";
  kind: "ok" | "threw" | "timeout" | "memory" | "stack" | "crashed";
  text: string;
  truncated: boolean;
  message?: string;
  line?: number;
  /** The reason_code of a child failure the cell let escape. */
  reasonCode?: string;
  /** False when the worker's VM could not be torn down cleanly: the parent ends the worker. */
  reusable?: boolean;
}

/** The VM is about to run the cell (the worker is warm): the parent arms its hard deadline from here. */
export interface CellStarted {
  type: "started";
}

export type WorkerMessage = ChildCall | CellDone | CellStarted;
