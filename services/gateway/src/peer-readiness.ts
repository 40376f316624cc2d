/** Readiness of the gateway's peers, probed over HTTP/1.1 at their /readyz. */

/** Probes a peer's /readyz with a short deadline; throws when it is not ready. */
export function httpReadinessProbe(baseUrl: string): () => Promise<void> {
  return async () => {
    const res = await fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(2_000) });
    if (!res.ok) throw new Error(`${baseUrl}/readyz answered ${res.status}`);
  };
}

/** One probe per peer service, named as the service. */
export function peerReadinessProbes(peers: Record<string, string>): Record<string, () => Promise<void>> {
  return Object.fromEntries(Object.entries(peers).map(([name, url]) => [name, httpReadinessProbe(url)]));
}
