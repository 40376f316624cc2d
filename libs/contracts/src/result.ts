/**
 * The one shape of an answer that did not throw: `ok: true` with the fields of its success, or
 * `ok: false` with the ToolFailure that says why (a thrown failure is a ToolFailureError).
 */
import type { ToolFailure } from "./failure.js";

export type Result<T extends object = object> = ({ ok: true } & T) | { ok: false; failure: ToolFailure };
