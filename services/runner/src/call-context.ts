/** The call a Runner handler is serving (the gateway's call id), for records that name it (the write journal). */
import { AsyncLocalStorage } from "node:async_hooks";

const storage = new AsyncLocalStorage<{ callId: string }>();

/** Runs `fn` as part of call `callId`. */
export function withCall<T>(callId: string, fn: () => Promise<T>): Promise<T> {
  return callId === "" ? fn() : storage.run({ callId }, fn);
}

/** The call being served, if any. */
export function currentCallId(): string | undefined {
  return storage.getStore()?.callId;
}
