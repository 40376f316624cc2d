/**
 * Tool policy: which tools a tenant or an OAuth client may use, by tool name and by category,
 * set by the operator. It narrows admission and never widens it: a tool the policy withholds
 * is, for that caller, a tool that does not exist (absent from tools/list, list_tools and
 * manifests; a call by name fails as an unknown tool). The tool-registry evaluates it once per
 * (tenant, client, profile) in its admission; the gateway only applies the result.
 */
import AjvModule from "ajv";
import type { ErrorObject } from "ajv";
import { toolDefinitions } from "./catalog.js";
import { array, object } from "./json-schema.js";
import type { JsonSchema, Schema, Static } from "./json-schema.js";
import { ToolCategory } from "./tool-definition.js";
import type { ToolDefinition } from "./tool-definition.js";

/** A canonical tool name's shape; that it names a tool of this catalog is checked by parseToolPolicy. */
const toolName = (): JsonSchema => ({ type: "string", pattern: "^[a-z][a-z0-9_]*$" });
const category: JsonSchema = { type: "string", enum: Object.values(ToolCategory) };
const names = (items: JsonSchema, description: string): Schema<string[]> =>
  array(items, description, { uniqueItems: true } as Partial<JsonSchema>) as Schema<string[]>;

/** One rule. Deny wins over allow; with any allow list present, only what it names is admitted. */
export const toolPolicyRuleSchema = object({
  allow_tools: names(toolName(), "Only these tools (and those of allow_categories) are admitted."),
  allow_categories: names(category, "Only tools of these categories (and those of allow_tools) are admitted."),
  deny_tools: names(toolName(), "These tools are withheld."),
  deny_categories: names(category, "Tools of these categories are withheld."),
});
export type ToolPolicyRule = Static<typeof toolPolicyRuleSchema>;

const ruleMap = (description: string): Schema<Record<string, ToolPolicyRule>> => ({
  type: "object",
  description,
  propertyNames: { type: "string", minLength: 1, maxLength: 256 },
  additionalProperties: toolPolicyRuleSchema,
});

/** The policy document (JSON). Every applicable rule must admit a tool for the caller to have it. */
export const toolPolicySchema = object(
  {
    default: { ...toolPolicyRuleSchema, description: "Applies to every caller." } as typeof toolPolicyRuleSchema,
    tenants: ruleMap("Rules by tenant id (the Project owner id, `agent:<tenant>:<project>`)."),
    clients: ruleMap("Rules by OAuth client id (the token's client_id or azp claim)."),
  },
  [],
  "WebCodex tool policy",
);
export type ToolPolicy = Static<typeof toolPolicySchema>;

/** The published schema document (docs/tool-policy.schema.json; the chart's toolRegistry.toolPolicy). */
export function toolPolicySchemaDocument(): Record<string, unknown> {
  return {
    $schema: "http://json-schema.org/draft-07/schema#",
    title: "WebCodex tool policy",
    ...toolPolicySchema,
    description:
      "Which tools a tenant or an OAuth client may use (WEBCODEX_TOOL_POLICY, the chart value toolRegistry.toolPolicy). Every applicable rule (default, the tenant's, the OAuth client's) must admit a tool; in a rule, deny wins and an allow list admits only what it names. Tool names must be tools of the running catalog.",
  };
}

/** Who asks: the tenant, and the OAuth client when the token names one. */
export interface ToolPolicySubject {
  tenant: string;
  oauthClient?: string | undefined;
}

export class ToolPolicyError extends Error {
  /** JSON pointer of the offending field, e.g. "/tenants/acme/deny_tools/0". */
  readonly field: string;
  /** What is wrong with it, e.g. "must be one of the known tool names". */
  readonly problem: string;
  constructor(field: string, problem: string) {
    super(`invalid tool policy: ${field || "/"} ${problem}`);
    this.name = "ToolPolicyError";
    this.field = field || "/";
    this.problem = problem;
  }
}

const Ajv = AjvModule.default ?? AjvModule;
let validator: ReturnType<InstanceType<typeof Ajv>["compile"]> | undefined;

function describe(error: ErrorObject): ToolPolicyError {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case "additionalProperties":
      return new ToolPolicyError(`${error.instancePath}/${String(params["additionalProperty"])}`, "is not a known field");
    case "enum":
      return new ToolPolicyError(error.instancePath, "must be one of the known categories");
    case "pattern":
      return new ToolPolicyError(error.instancePath, "must be one of the known tool names");
    default:
      return new ToolPolicyError(error.instancePath, error.message ?? error.keyword);
  }
}

/** Checks a parsed policy document; throws ToolPolicyError naming the first bad field. */
export function parseToolPolicy(value: unknown): ToolPolicy {
  validator ??= new Ajv({ allErrors: false, strict: true }).compile(toolPolicySchema);
  if (!validator(value)) throw describe((validator.errors ?? [])[0] as ErrorObject);
  const policy = value as ToolPolicy;
  // A name that is no tool of this catalog is a typo that would silently admit the tool.
  const known = new Set(toolDefinitions().map((d) => d.name));
  const rules: Array<[string, ToolPolicyRule]> = [
    ...(policy.default ? [["/default", policy.default] as [string, ToolPolicyRule]] : []),
    ...Object.entries(policy.tenants ?? {}).map(([k, r]): [string, ToolPolicyRule] => [`/tenants/${pointer(k)}`, r]),
    ...Object.entries(policy.clients ?? {}).map(([k, r]): [string, ToolPolicyRule] => [`/clients/${pointer(k)}`, r]),
  ];
  for (const [at, rule] of rules) {
    for (const list of ["allow_tools", "deny_tools"] as const) {
      const i = (rule[list] ?? []).findIndex((n) => !known.has(n));
      if (i >= 0) throw new ToolPolicyError(`${at}/${list}/${i}`, "must be one of the known tool names");
    }
  }
  return policy;
}

/** A JSON pointer segment (RFC 6901). */
const pointer = (key: string) => key.replace(/~/g, "~0").replace(/\//g, "~1");

/** Parses policy JSON text (`source` names where it came from in the message). */
export function parseToolPolicyText(text: string, source: string): ToolPolicy {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ToolPolicyError("/", `is not JSON (${source}): ${error instanceof Error ? error.message : String(error)}`);
  }
  return parseToolPolicy(parsed);
}

/** A map's own entry only: an id such as "constructor" never reaches Object.prototype. */
const own = (map: Record<string, ToolPolicyRule> | undefined, key: string | undefined): ToolPolicyRule | undefined =>
  map !== undefined && key !== undefined && Object.hasOwn(map, key) ? map[key] : undefined;

function ruleAdmits(rule: ToolPolicyRule | undefined, def: ToolDefinition): boolean {
  if (!rule) return true;
  if (rule.deny_tools?.includes(def.name) || rule.deny_categories?.includes(def.category)) return false;
  if (rule.allow_tools === undefined && rule.allow_categories === undefined) return true;
  return (rule.allow_tools?.includes(def.name) ?? false) || (rule.allow_categories?.includes(def.category) ?? false);
}

/** Whether `policy` lets `subject` have `def`: the default rule, its tenant's and its client's all admit it. */
export function policyAdmits(policy: ToolPolicy | undefined, subject: ToolPolicySubject, def: ToolDefinition): boolean {
  if (!policy) return true;
  return ruleAdmits(policy.default, def) && ruleAdmits(own(policy.tenants, subject.tenant), def) && ruleAdmits(own(policy.clients, subject.oauthClient), def);
}
