/**
 * Readiness of the gateway's peers, probed over HTTP/1.1 at their /readyz. A failed probe
 * says why in the gateway's own /readyz: the peer cannot be reached, or which of the peer's
 * checks fail (e.g. `ref-resolver: not ready (503): postgres unreachable (connect ECONNREFUSED …)`).
 */
import type { ReadinessReport } from "@webcodex/platform";

const PROBE_TIMEOUT_MS = 2_000;
const MAX_DETAIL = 400;

/** "name detail" for each failing check of a peer's readiness report; "" when there is none. */
function failingChecks(body: string): string {
  try {
    const report = JSON.parse(body) as Partial<ReadinessReport>;
    return Object.entries(report.checks ?? {})
      .filter(([, c]) => c.ok !== true)
      .map(([name, c]) => `${name} ${c.detail ?? "not ready"}`)
      .join("; ");
  } catch {
    return "";
  }
}

function fetchFailure(error: unknown): string {
  if (error instanceof Error && error.name === "TimeoutError") return `no answer within ${PROBE_TIMEOUT_MS} ms`;
  const cause = (error as { cause?: { message?: string; code?: string } }).cause;
  return cause?.message || cause?.code || (error instanceof Error ? error.message : String(error));
}

/** Probes a peer's /readyz with a short deadline; throws, saying why, when it is not ready. */
export function httpReadinessProbe(baseUrl: string): () => Promise<void> {
  return async () => {
    let res: Response;
    try {
      res = await fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    } catch (error) {
      throw new Error(`unreachable at ${baseUrl} (${fetchFailure(error)})`);
    }
    const body = await res.text().catch(() => "");
    if (res.ok) return;
    const failing = failingChecks(body);
    throw new Error(`not ready (${res.status})${failing ? `: ${failing}` : ""}`.slice(0, MAX_DETAIL));
  };
}

/** One probe per peer service, named as the service. */
export function peerReadinessProbes(peers: Record<string, string>): Record<string, () => Promise<void>> {
  return Object.fromEntries(Object.entries(peers).map(([name, url]) => [name, httpReadinessProbe(url)]));
}
