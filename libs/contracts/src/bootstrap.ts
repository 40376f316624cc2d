/**
 * The ceiling every builtin bootstrap field a Host receives at `initialize` (the server
 * instructions and each serverInfo text) must fit: a hard ceiling, not a target. Skill and
 * catalog budgets are separate resource contracts (list_skills, read_skill limits).
 */
export const BUILTIN_BOOTSTRAP_GUIDANCE_MAX_CHARS = 1536;

/** The short skills hint the server instructions carry; the catalog itself is a tool result. */
export const SKILLS_BOOTSTRAP_HINT =
  "Agent Skills: list_skills (with project) names them; read_skill one a task needs, and reuse a complete body while its revision is unchanged.";
