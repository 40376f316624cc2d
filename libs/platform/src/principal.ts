/**
 * The authenticated caller, carried between services in Connect request headers. The
 * gateway sets them from the verified token; every service reads them back and re-checks
 * authorization itself. They are never taken from tool arguments.
 */
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * A person (or service) within a tenant: (tenant, subject). The tenant comes from the
 * configured token claim (see the gateway's tenancy presets); Projects belong to a tenant
 * and are owned by one subject in it.
 */
export interface Principal {
  /** Tenant id; Projects live at `agent:<tenant>:<project>`. */
  readonly clientId: string;
  readonly subject: string;
  /** The token maps to the tenant admin role: may change any tenant Project's settings. */
  readonly tenantAdmin?: boolean;
}

const clientHeader = "x-webcodex-client-id";
const subjectHeader = "x-webcodex-subject";
const adminHeader = "x-webcodex-tenant-admin";

/** Call options that carry `principal` to the next service. */
export function principalHeaders(principal: Principal): Record<string, string> {
  return { [clientHeader]: principal.clientId, [subjectHeader]: principal.subject, ...(principal.tenantAdmin ? { [adminHeader]: "1" } : {}) };
}

/** Reads the caller from request headers; a request without one is rejected. */
export function principalFromHeaders(headers: Headers): Principal {
  const clientId = headers.get(clientHeader);
  const subject = headers.get(subjectHeader);
  if (!clientId || !subject) throw new ConnectError("missing principal", Code.Unauthenticated);
  return headers.get(adminHeader) === "1" ? { clientId, subject, tenantAdmin: true } : { clientId, subject };
}

/** Header carrying the Runner fleet token between broker and Runners; never a Host credential. */
export const RUNNER_TOKEN_HEADER = "x-webcodex-runner-token";
