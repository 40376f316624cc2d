import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { SPAWNER_MODES, tempRoot } from "./exec.test-support.js";
import { execFileVia, type ExecFileError } from "./exec-file.js";
import type { Spawner } from "./spawner.js";

interface Outcome {
  code: unknown;
  signal: unknown;
  stdout: string;
  stderr: string;
}

function viaNode(file: string, args: string[], cwd: string, maxBuffer: number): Promise<Outcome> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, maxBuffer, encoding: "utf8" }, (error, stdout, stderr) => {
      const e = error as (Error & { code?: unknown; signal?: unknown }) | null;
      resolve({ code: e?.code ?? 0, signal: e?.signal ?? null, stdout, stderr });
    });
  });
}

function via(spawner: Spawner, file: string, args: string[], cwd: string, maxBuffer: number): Promise<Outcome> {
  return new Promise((resolve) => {
    execFileVia(spawner, file, args, { cwd, maxBuffer }, (error: ExecFileError | null, stdout, stderr) => {
      resolve({ code: error?.code ?? 0, signal: error?.signal ?? null, stdout, stderr });
    });
  });
}

const CASES: Array<[string, string, string[]]> = [
  ["success with both streams", "sh", ["-c", "echo out; echo err >&2"]],
  ["a non-zero exit code", "sh", ["-c", "echo partial; exit 3"]],
  ["death by signal", "sh", ["-c", "kill -TERM $$"]],
  ["a missing program", "/nonexistent/git", []],
  ["output past maxBuffer", "sh", ["-c", "seq 1 100000"]],
];

for (const [mode, makeSpawner] of SPAWNER_MODES) {
  describe(`execFileVia (${mode})`, () => {
    let root = "";
    let cleanup = async (): Promise<void> => {};
    let spawner: Spawner;
    before(async () => {
      ({ root, cleanup } = await tempRoot());
      spawner = makeSpawner();
    });
    after(async () => {
      await spawner.close();
      await cleanup();
    });

    for (const [name, file, args] of CASES) {
      it(`reports like execFile: ${name}`, async () => {
        const expected = await viaNode(file, args, root, 64 * 1024);
        const actual = await via(spawner, file, args, root, 64 * 1024);
        assert.equal(actual.code, expected.code);
        assert.equal(actual.signal, expected.signal);
        if (expected.code === "ERR_CHILD_PROCESS_STDIO_MAXBUFFER") {
          // execFile keeps a partial last chunk; only the limit matters here.
          assert.ok(actual.stdout.length <= 64 * 1024);
        } else {
          assert.equal(actual.stdout, expected.stdout);
          assert.equal(actual.stderr, expected.stderr);
        }
      });
    }
  });
}
