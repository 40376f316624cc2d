import assert from "node:assert/strict";
import { mkdir, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ReasonCode } from "@webcodex/contracts";
import { SPAWNER_MODES, failsWith, tempRoot } from "./exec.test-support.js";
import { createExecutor } from "./index.js";
import type { Spawner } from "./spawner.js";
import type { CompletedResult, Executor, RunResult } from "./index.js";

function completed(result: RunResult): CompletedResult {
  assert.equal(result.execution_state, "completed", JSON.stringify(result));
  return result as CompletedResult;
}

for (const [mode, makeSpawner] of SPAWNER_MODES) {
  describe(`run tools (${mode})`, () => {
    let root = "";
    let cleanup = async (): Promise<void> => {};
    let executor: Executor;
    let spawner: Spawner;
    before(async () => {
      ({ root, cleanup } = await tempRoot());
      await mkdir(path.join(root, "pkg"));
      await writeFile(path.join(root, "pkg", "helper.py"), "GREETING = 'from helper'\n");
      await symlink("/", path.join(root, "up"));
      spawner = makeSpawner();
      executor = createExecutor({ root, spawner });
    });
    after(async () => {
      await executor.shutdown();
      await spawner.close();
      await cleanup();
    });

    it("run_process echoes through literal argv without a shell", async () => {
      const result = completed(await executor.runProcess({ args: ["echo", "hi", "$HOME", "a b"] }));
      assert.equal(result.stdout, "hi $HOME a b\n");
      assert.equal(result.exit_code, 0);
      assert.equal(result.signal, null);
      assert.equal(result.timed_out, false);
      assert.equal(result.stdout_bytes, 13);
      assert.equal(result.truncated, false);
      assert.equal(result.output, undefined);
      assert.deepEqual(result.effective, { timeout_ms: 120_000, wait_ms: 10_000 });
      assert.match(result.job_id, /^job_[0-9a-f]+$/);
      assert.ok(!Number.isNaN(Date.parse(result.started_at)));
    });

    it("run_shell echoes with shell grammar and reports command_summary, cwd and shell", async () => {
      const result = completed(await executor.runShell({ command: "echo out && echo err >&2", cwd: "pkg" }));
      assert.equal(result.stdout, "out\n");
      assert.equal(result.stderr, "err\n");
      assert.equal(result.output, "out\nerr\n");
      assert.equal(result.command_summary, "echo out && echo err >&2");
      assert.equal(result.cwd, "pkg");
      assert.equal(result.shell, "bash");
    });

    it("run_shell cuts command_summary to 200 characters and reports '.' for the root", async () => {
      const command = `echo ${"x".repeat(300)} > /dev/null`;
      const result = completed(await executor.runShell({ command, shell: "sh" }));
      assert.equal(result.command_summary?.length, 200);
      assert.equal(result.cwd, ".");
      assert.equal(result.shell, "sh");
    });

    it("run_shell login runs bash -lc and refuses login with sh", async () => {
      const result = completed(await executor.runShell({ command: "shopt -q login_shell && echo login", login: true }));
      assert.equal(result.stdout, "login\n");
      await assert.rejects(executor.runShell({ command: "true", shell: "sh", login: true }), failsWith(ReasonCode.invalidValue, "login_requires_bash"));
    });

    it("run_script runs python code as data, never through a shell", async () => {
      const code = 'import sys\nprint("it\'s $HOME `x` \\"q\\"", sys.argv[1:])';
      const result = completed(await executor.runScript({ language: "python", code, args: ["a", "b c"] }));
      assert.equal(result.stdout, "it's $HOME `x` \"q\" ['a', 'b c']\n");
      assert.equal(result.exit_code, 0);
    });

    it("run_script imports project modules from its cwd", async () => {
      const code = "import helper\nprint(helper.GREETING)";
      const result = completed(await executor.runScript({ language: "python", code, cwd: "pkg" }));
      assert.equal(result.stdout, "from helper\n");
    });

    it("run_script honours env additions over the scrubbed base, and validates them like run_process", async () => {
      const result = completed(
        await executor.runScript({
          language: "python",
          code: "import os\nprint(os.environ.get('GREETING'), os.environ.get('PYTHONUNBUFFERED'))",
          env: { GREETING: "hi" },
        }),
      );
      assert.equal(result.stdout, "hi 1\n");
      await assert.rejects(
        executor.runScript({ language: "python", code: "print(1)", env: { "1BAD": "x" } }),
        failsWith(ReasonCode.invalidValue, "env_key_invalid"),
      );
    });

    it("run_script refuses languages other than python", async () => {
      await assert.rejects(
        executor.runScript({ language: "python3" as "python", code: "print(1)" }),
        failsWith(ReasonCode.invalidValue, "language_unsupported"),
      );
    });

    it("run_process feeds stdin and gives /dev/null when there is none", async () => {
      const fed = completed(await executor.runProcess({ args: ["cat"], stdin: "hello\nwörld" }));
      assert.equal(fed.stdout, "hello\nwörld");
      const empty = completed(await executor.runProcess({ args: ["cat"], wait_ms: 5_000 }));
      assert.equal(empty.stdout, "");
      assert.equal(empty.exit_code, 0);
    });

    it("children see env additions and the scrubbed base, never the Runner's secrets", async () => {
      process.env["WEBCODEX_TEST_RUNNER_TOKEN"] = "runner-secret-value";
      try {
        const result = completed(await executor.runProcess({ args: ["env"], env: { FOO: "bar baz" } }));
        const keys = result.stdout
          .trim()
          .split("\n")
          .map((line) => line.slice(0, line.indexOf("=")));
        assert.deepEqual(keys.sort(), ["FOO", "HOME", "LANG", "PATH", "TERM", "TMPDIR", "WEBCODEX_JOB_TAG"]);
        assert.match(result.stdout, /^FOO=bar baz$/m);
        assert.match(result.stdout, /^TERM=dumb$/m);
        assert.ok(!result.stdout.includes("runner-secret-value"));
      } finally {
        delete process.env["WEBCODEX_TEST_RUNNER_TOKEN"];
      }
    });

    it("refuses a cwd outside the project for every run tool, starting nothing", async () => {
      const outside = failsWith(ReasonCode.pathOutsideProject);
      await assert.rejects(executor.runProcess({ args: ["pwd"], cwd: ".." }), outside);
      await assert.rejects(executor.runShell({ command: "pwd", cwd: "/etc" }), outside);
      await assert.rejects(executor.runScript({ language: "python", code: "", cwd: "up" }), outside);
      await assert.rejects(executor.runDetachedProcess({ args: ["pwd"], cwd: "up/tmp" }), outside);
    });

    it("reports a non-zero exit code", async () => {
      const result = completed(await executor.runShell({ command: "echo partial; exit 7" }));
      assert.equal(result.exit_code, 7);
      assert.equal(result.signal, null);
      assert.equal(result.state, "completed");
      assert.equal(result.stdout, "partial\n");
    });

    it("reports death by signal with a null exit code", async () => {
      const result = completed(await executor.runShell({ command: "kill -KILL $$" }));
      assert.equal(result.exit_code, null);
      assert.equal(result.signal, "SIGKILL");
      assert.equal(result.timed_out, false);
    });

    it("reports a missing program as failed_to_start / command_not_found, a proven fact", async () => {
      const result = await executor.runProcess({ args: ["webcodex-no-such-command-xyz", "--x"] });
      assert.equal(result.execution_state, "failed_to_start");
      assert.ok(result.execution_state === "failed_to_start");
      assert.equal(result.error_code, "command_not_found");
      assert.equal(result.program, "webcodex-no-such-command-xyz");
      const [observed] = executor.observeJobs({ job_ids: [result.job_id] }).jobs;
      assert.equal(observed?.state, "failed_to_start");
    });

    it("treats a missing command inside a shell as the shell's exit 127", async () => {
      const result = completed(await executor.runShell({ command: "webcodex-no-such-command-xyz" }));
      assert.equal(result.exit_code, 127);
    });

    it("truncates 200 KB of output to head and tail with exact byte counts", async () => {
      const code = "import sys\nsys.stdout.write('x' * 200000)\nsys.stderr.write('e' * 10)";
      const result = completed(await executor.runScript({ language: "python", code }));
      assert.equal(result.stdout_bytes, 200_000);
      assert.equal(result.stderr_bytes, 10);
      assert.equal(result.truncated, true);
      assert.deepEqual(result.omitted_bytes, { stdout: 200_000 - 2 * 16_384, stderr: 0 });
      assert.equal(result.stdout, `${"x".repeat(16_384)}\n[... 167232 bytes omitted ...]\n${"x".repeat(16_384)}`);
      assert.equal(result.stderr, "eeeeeeeeee");
    });

    it("truncates multi-byte output on character boundaries, counting every byte", async () => {
      const code = "import sys\nsys.stdout.write('€' * 70000)"; // 210000 bytes
      const result = completed(await executor.runShell({ command: `python3 -c "${code}"` }));
      assert.equal(result.stdout_bytes, 210_000);
      assert.ok(!result.stdout.includes("\uFFFD"));
      assert.equal(result.omitted_bytes?.stdout, 210_000 - 2 * 16_383);
      assert.equal(result.omitted_bytes?.output, 210_000 - 2 * 16_383);
    });

    it("clamps timeout_ms and wait_ms above their ceilings and reports the effective values", async () => {
      const result = completed(await executor.runProcess({ args: ["true"], timeout_ms: 10_000_000, wait_ms: 90_000 }));
      assert.deepEqual(result.effective, { timeout_ms: 600_000, wait_ms: 30_000 });
    });

    it("rejects empty argv and NUL bytes in arguments", async () => {
      await assert.rejects(executor.runProcess({ args: [] }), failsWith(ReasonCode.invalidValue, "args_empty"));
      await assert.rejects(executor.runProcess({ args: ["echo", "a\0b"] }), failsWith(ReasonCode.invalidValue, "arg_invalid"));
    });
  });
}
