/**
 * The authenticated caller, carried between services in Connect request headers. The
 * gateway sets them from the verified token; every service reads them back and re-checks
 * authorization itself. They are never taken from tool arguments.
 */
import { Code, ConnectError } from "@connectrpc/connect";

export interface Principal {
  /** Tenant / OAuth client id; Projects are owned by a client id. */
  readonly clientId: string;
  readonly subject: string;
}

const clientHeader = "x-webcodex-client-id";
const subjectHeader = "x-webcodex-subject";

/** Call options that carry `principal` to the next service. */
export function principalHeaders(principal: Principal): Record<string, string> {
  return { [clientHeader]: principal.clientId, [subjectHeader]: principal.subject };
}

/** Reads the caller from request headers; a request without one is rejected. */
export function principalFromHeaders(headers: Headers): Principal {
  const clientId = headers.get(clientHeader);
  const subject = headers.get(subjectHeader);
  if (!clientId || !subject) throw new ConnectError("missing principal", Code.Unauthenticated);
  return { clientId, subject };
}

/** Header carrying the Runner fleet token between broker and Runners; never a Host credential. */
export const RUNNER_TOKEN_HEADER = "x-webcodex-runner-token";
