/**
 * ModelWorkflowPolicy: typed deployment facts about how models are expected to work here,
 * read from configuration. They shape the context a model is given and the facts cards
 * report, never tool names, schemas, descriptions or Direct ranks.
 */

/** Whether Goal plans are a recommended workflow or used only when asked for. */
export const GOAL_SELECTIONS = ["on_demand", "recommended"] as const;
export type GoalSelection = (typeof GOAL_SELECTIONS)[number];

/**
 * What an operator has validated about the Host resuming a model turn without the user:
 * `unknown` until someone checked the actual Host; an accepted ui/message alone proves nothing.
 */
export const UNATTENDED_CONTINUATIONS = ["unknown", "requires_confirmation", "validated"] as const;
export type UnattendedContinuation = (typeof UNATTENDED_CONTINUATIONS)[number];

export interface ModelWorkflowPolicy {
  readonly goalSelection: GoalSelection;
  readonly hostInteraction: { readonly unattendedContinuation: UnattendedContinuation };
}

export const DEFAULT_MODEL_WORKFLOW_POLICY: ModelWorkflowPolicy = { goalSelection: "on_demand", hostInteraction: { unattendedContinuation: "unknown" } };

/**
 * The policy from its two configuration values (absent or empty: the default); an unknown
 * value throws, naming the setting, so a deployment fails fast instead of guessing.
 */
export function modelWorkflowPolicyFrom(goalSelection: string | undefined, unattendedContinuation: string | undefined): ModelWorkflowPolicy {
  const pick = <T extends string>(name: string, value: string | undefined, allowed: readonly T[], fallback: T): T => {
    if (value === undefined || value === "") return fallback;
    if (!(allowed as readonly string[]).includes(value)) throw new Error(`${name} must be one of ${allowed.join(", ")}`);
    return value as T;
  };
  return {
    goalSelection: pick("WEBCODEX_GOAL_SELECTION", goalSelection, GOAL_SELECTIONS, DEFAULT_MODEL_WORKFLOW_POLICY.goalSelection),
    hostInteraction: {
      unattendedContinuation: pick(
        "WEBCODEX_UNATTENDED_CONTINUATION",
        unattendedContinuation,
        UNATTENDED_CONTINUATIONS,
        DEFAULT_MODEL_WORKFLOW_POLICY.hostInteraction.unattendedContinuation,
      ),
    },
  };
}
