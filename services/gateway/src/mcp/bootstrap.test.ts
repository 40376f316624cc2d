import { test } from "node:test";
import assert from "node:assert/strict";
import { BUILTIN_BOOTSTRAP_GUIDANCE_MAX_CHARS, SKILLS_BOOTSTRAP_HINT } from "@webcodex/contracts";
import { SERVER_INSTRUCTIONS } from "./mcp-server.js";

test("the server instructions fit the bootstrap ceiling and carry the skills hint", () => {
  assert.equal(BUILTIN_BOOTSTRAP_GUIDANCE_MAX_CHARS, 1536);
  assert.ok(
    SERVER_INSTRUCTIONS.length <= BUILTIN_BOOTSTRAP_GUIDANCE_MAX_CHARS,
    `instructions are ${SERVER_INSTRUCTIONS.length} characters, over ${BUILTIN_BOOTSTRAP_GUIDANCE_MAX_CHARS}`,
  );
  assert.ok(SERVER_INSTRUCTIONS.includes(SKILLS_BOOTSTRAP_HINT));
});
