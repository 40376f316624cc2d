/**
 * Sparse success results state each fact once. `repeatedFacts` finds, in one result, a field
 * that repeats a fact another field already holds: two fields of one object with the same
 * non-trivial value, or a list of values that is exactly one key of a sibling list of objects
 * (a `paths` list beside `files: [{path}]`). The tool-contract tests run it over every success
 * result they receive.
 */
type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** A value that says something on its own: a non-empty list or object, or a string of some length. */
function substantial(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0;
  if (isObject(v)) return Object.keys(v).length > 0;
  return typeof v === "string" && v.length >= 8;
}

const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, value: unknown) => (isObject(value) ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => a.localeCompare(b))) : value));

/**
 * Whether two fields with equal values state one fact: both are lists or summaries of the
 * same kind (their names share a word such as `paths`/`changed_paths`), not two facts that
 * happen to be equal (`created_at` and `updated_at`, `read` and `changed`).
 */
function sameFactNames(a: string, b: string): boolean {
  const words = (k: string) => new Set(k.split("_").filter((w) => !["at", "id", "ref", "count"].includes(w)));
  const wa = words(a);
  return [...words(b)].some((w) => wa.has(w));
}

/** The repeated facts in `value`, each as "a.b repeats a.c". */
export function repeatedFacts(value: unknown, at = ""): string[] {
  const found: string[] = [];
  if (Array.isArray(value)) {
    value.forEach((v, i) => found.push(...repeatedFacts(v, `${at}[${String(i)}]`)));
    return found;
  }
  if (!isObject(value)) return found;
  // A JSON Schema describes fields; equal sub-schemas are not repeated facts.
  if (value["type"] !== undefined && (value["properties"] !== undefined || value["items"] !== undefined)) return found;
  const entries = Object.entries(value);
  const name = (k: string) => (at === "" ? k : `${at}.${k}`);
  for (const [i, [ka, va]] of entries.entries()) {
    // The same count, list or object under two names (not an equal timestamp or id: those are separate facts that may coincide).
    for (const [kb, vb] of entries.slice(i + 1)) {
      if (substantial(va) && canonical(va) === canonical(vb) && sameFactNames(ka, kb)) found.push(`${name(kb)} repeats ${name(ka)}`);
    }
    // A list of scalars that is exactly one key of a sibling list of objects.
    if (Array.isArray(va) && va.length > 0 && va.every((x) => typeof x === "string" || typeof x === "number")) {
      const set = canonical([...new Set(va.map(String))].sort());
      for (const [kb, vb] of entries) {
        if (kb === ka || !Array.isArray(vb) || vb.length === 0 || !vb.every(isObject)) continue;
        for (const key of Object.keys(vb[0] as Json)) {
          const projected = vb.map((o) => o[key]);
          if (projected.every((x) => typeof x === "string" || typeof x === "number") && canonical([...new Set(projected.map(String))].sort()) === set)
            found.push(`${name(ka)} repeats ${name(kb)}[].${key}`);
        }
      }
    }
    found.push(...repeatedFacts(va, name(ka)));
  }
  return found;
}
