// Job states have one owner (libs/contracts/src/job-states.ts); ESLint refuses a bare job-state
// string in the services that handle Jobs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { ESLint } from "eslint";

const root = new URL("../../../", import.meta.url).pathname;

test("ESLint refuses a string-literal job state in the broker and the gateway, and accepts JOB_STATE and type positions", async () => {
  const eslint = new ESLint({ cwd: root });
  const lint = async (file: string, text: string) => {
    const [result] = await eslint.lintText(text, { filePath: join(root, file) });
    return (result?.messages ?? []).filter((m) => m.ruleId === "no-restricted-syntax").map((m) => m.message);
  };
  for (const file of ["services/runner-broker/src/jobs/job-desk.ts", "services/gateway/src/presentation.ts"]) {
    for (const word of ["queued", "recovering", "succeeded", "lost_after_reconcile"]) {
      const messages = await lint(file, `export const s: string = "${word}";\n`);
      assert.equal(messages.length, 1, `${file}: ${word}`);
      assert.match(messages[0] ?? "", /JOB_STATE from @webcodex\/contracts/);
    }
    assert.deepEqual(await lint(file, 'import { JOB_STATE } from "@webcodex/contracts";\nexport const s: string = JOB_STATE.succeeded;\n'), []);
    assert.deepEqual(await lint(file, 'export type S = "queued" | "running";\n'), []);
  }
  // The owner itself spells the words.
  assert.deepEqual(await lint("libs/contracts/src/job-states.ts", 'export const s = "succeeded";\n'), []);
});
