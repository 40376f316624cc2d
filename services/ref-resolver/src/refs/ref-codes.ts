/**
 * Short ref codes: `~p<n>` project_ref, `~s<n>` session_ref, `~a<n>` agent_continuation_ref,
 * `~t<n>` attempt_ref. Each kind has its own table, counter and contract; a code of one kind
 * is never accepted as another. Codes are kept as decimal strings end to end so no code is
 * ever rounded onto a neighbour (a JS number loses integers above 2^53).
 */
export const RefKind = {
  project: "project",
  session: "session",
  agentContinuation: "agent_continuation",
  attempt: "attempt",
} as const;
export type RefKind = (typeof RefKind)[keyof typeof RefKind];

const prefixes: Readonly<Record<RefKind, string>> = {
  project: "~p",
  session: "~s",
  agent_continuation: "~a",
  attempt: "~t",
};

/** At most 18 digits, no leading zero: every accepted code fits Postgres bigint exactly. */
const CODE = /^[1-9][0-9]{0,17}$/;

/** The text of a ref of `kind` with `code` (a positive integer, as issued by the counter). */
export function formatRef(kind: RefKind, code: string | bigint | number): string {
  const text = typeof code === "string" ? code : code.toString();
  if (!CODE.test(text)) throw new Error(`invalid ${kind} ref code ${text}`);
  return `${prefixes[kind]}${text}`;
}

/**
 * The decimal code of `text` when it is exactly a ref of `kind`, else undefined. No
 * trimming, case folding or other repair: a ref is an identity selector, so it is exact.
 */
export function parseRef(kind: RefKind, text: string): string | undefined {
  const prefix = prefixes[kind];
  if (!text.startsWith(prefix)) return undefined;
  const code = text.slice(prefix.length);
  return CODE.test(code) ? code : undefined;
}
