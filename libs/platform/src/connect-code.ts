/**
 * Connect codes as the strings Connect itself puts on the wire (`deadline_exceeded`), both
 * ways through one table: a code reported in a failure's detail_code, a string parsed back
 * into a Code only if it names one.
 */
import { Code } from "@connectrpc/connect";

const NAMES = {
  [Code.Canceled]: "canceled",
  [Code.Unknown]: "unknown",
  [Code.InvalidArgument]: "invalid_argument",
  [Code.DeadlineExceeded]: "deadline_exceeded",
  [Code.NotFound]: "not_found",
  [Code.AlreadyExists]: "already_exists",
  [Code.PermissionDenied]: "permission_denied",
  [Code.ResourceExhausted]: "resource_exhausted",
  [Code.FailedPrecondition]: "failed_precondition",
  [Code.Aborted]: "aborted",
  [Code.OutOfRange]: "out_of_range",
  [Code.Unimplemented]: "unimplemented",
  [Code.Internal]: "internal",
  [Code.Unavailable]: "unavailable",
  [Code.DataLoss]: "data_loss",
  [Code.Unauthenticated]: "unauthenticated",
} as const satisfies Record<Code, string>;

export type ConnectCodeName = (typeof NAMES)[Code];

const BY_NAME = new Map<string, Code>(Object.entries(NAMES).map(([code, name]) => [name, Number(code) as Code]));

/** The wire name of a Connect code ("unknown" for a number outside the enum). */
export function connectCodeName(code: Code): ConnectCodeName {
  return (NAMES as Record<number, ConnectCodeName | undefined>)[code] ?? "unknown";
}

/** The Connect code a wire name names, or undefined for any other string. */
export function connectCodeFromName(name: string): Code | undefined {
  return BY_NAME.get(name);
}
