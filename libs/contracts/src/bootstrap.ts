/**
 * The ceiling every builtin bootstrap field a Host receives at `initialize` (the server
 * instructions and each serverInfo text) must fit: a hard ceiling, not a target. Skill and
 * catalog budgets are separate resource contracts (list_skills, read_skill limits).
 */
export const BUILTIN_BOOTSTRAP_GUIDANCE_MAX_CHARS = 1536;

/** The short skills hint the server instructions carry; the catalog itself is a tool result. */
export const SKILLS_BOOTSTRAP_HINT = "Skills: list_skills (with project), then read_skill; reuse a complete body while its revision is unchanged.";

/** The bootstrap guidance a Host that selects Code Mode gets (the code_mode Host profile). */
export const CODE_MODE_GUIDANCE =
  "Code Mode: chain dependent reads in one run_code_cell (API: read_tool_manifest); text() compact evidence. " + "Edit, run, validate outside cells.";
