/**
 * Canonical Project ids: `agent:<client_id>:<project_id>`. Both parts are `[A-Za-z0-9._-]`,
 * 1 to 128 characters, so neither holds a ':' and the id parses back unambiguously.
 */
const ID_PART = /^[A-Za-z0-9._-]{1,128}$/;

/** Whether `value` can be a client id or project id inside a canonical Project id. */
export function isCanonicalIdPart(value: string): boolean {
  return ID_PART.test(value);
}

/** `agent:<client_id>:<project_id>`, without validating the parts (see isCanonicalIdPart). */
export function canonicalProjectId(clientId: string, projectId: string): string {
  return `agent:${clientId}:${projectId}`;
}

/** The client and project ids of `agent:<client_id>:<project_id>` (project ids never contain ':'). */
export function parseCanonicalProjectId(canonicalId: string): { clientId: string; projectId: string } | undefined {
  if (!canonicalId.startsWith("agent:")) return undefined;
  const rest = canonicalId.slice("agent:".length);
  const i = rest.lastIndexOf(":");
  if (i <= 0 || i === rest.length - 1) return undefined;
  return { clientId: rest.slice(0, i), projectId: rest.slice(i + 1) };
}

/** Whether `value` is a well-formed canonical Project id (both parts valid). */
export function isCanonicalProjectId(value: string): boolean {
  const parts = parseCanonicalProjectId(value);
  return parts !== undefined && isCanonicalIdPart(parts.clientId) && isCanonicalIdPart(parts.projectId);
}
