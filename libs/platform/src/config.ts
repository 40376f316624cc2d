/**
 * Environment configuration: parsed and validated once, every problem reported in one
 * message. Only each service's `config.ts` calls this, passing `process.env` (tests pass
 * their own record).
 */
export type Env = Readonly<Record<string, string | undefined>>;

type FieldSpec =
  | { kind: "string"; env: string; default?: string; required?: boolean; doc?: string }
  | { kind: "int"; env: string; default?: number; min?: number; max?: number; optional?: true; doc?: string }
  | { kind: "bool"; env: string; default?: boolean; doc?: string }
  | { kind: "enum"; env: string; values: readonly string[]; default?: string; doc?: string };

type FieldValue<F extends FieldSpec> = F extends { kind: "int"; optional: true }
  ? number | undefined
  : F extends { kind: "int" }
    ? number
    : F extends { kind: "bool" }
      ? boolean
      : F extends { kind: "string"; required: true }
        ? string
        : F extends { kind: "string"; default: string }
          ? string
          : F extends { kind: "enum"; default: string }
            ? string
            : string | undefined;

export type ConfigSpec = Record<string, FieldSpec>;
export type ConfigOf<S extends ConfigSpec> = { readonly [K in keyof S]: FieldValue<S[K]> };

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join("\n  - ")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}

/** Parses `env` against `spec`; throws one ConfigError listing every problem. */
export function readConfig<S extends ConfigSpec>(spec: S, env: Env): ConfigOf<S> {
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(spec)) {
    const raw = env[field.env];
    const present = raw !== undefined && raw !== "";
    switch (field.kind) {
      case "string":
        if (!present && field.required === true && field.default === undefined) problems.push(`${field.env} is required`);
        out[key] = present ? raw : field.default;
        break;
      case "int": {
        if (!present) {
          // An optional int without a default is absent when unset (not 0).
          out[key] = field.default ?? (field.optional === true ? undefined : 0);
          break;
        }
        const n = Number(raw);
        if (!Number.isInteger(n)) problems.push(`${field.env} must be an integer, got ${JSON.stringify(raw)}`);
        else if (field.min !== undefined && n < field.min) problems.push(`${field.env} must be >= ${field.min}`);
        else if (field.max !== undefined && n > field.max) problems.push(`${field.env} must be <= ${field.max}`);
        out[key] = n;
        break;
      }
      case "bool":
        if (!present) out[key] = field.default ?? false;
        else if (/^(1|true|yes|on)$/i.test(raw)) out[key] = true;
        else if (/^(0|false|no|off)$/i.test(raw)) out[key] = false;
        else problems.push(`${field.env} must be a boolean, got ${JSON.stringify(raw)}`);
        break;
      case "enum":
        if (!present) out[key] = field.default;
        else if (!field.values.includes(raw)) problems.push(`${field.env} must be one of ${field.values.join(", ")}, got ${JSON.stringify(raw)}`);
        else out[key] = raw;
        break;
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return out as ConfigOf<S>;
}
