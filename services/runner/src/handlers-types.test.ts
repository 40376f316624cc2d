import { test } from "node:test";
import assert from "node:assert/strict";
import type { RunnerArguments, RunnerToolName } from "@webcodex/contracts";
import type { ExactlyTyped, Implementations } from "./handlers.js";

/** A run typed for tool N (never called: these tests are about what compiles). */
const runFor =
  <N extends RunnerToolName>() =>
  (_args: RunnerArguments<N>, _signal: AbortSignal): Promise<unknown> =>
    Promise.resolve(undefined);

test("a Runner implementation map without one of the catalog's Runner tools does not compile", () => {
  const all = {} as Implementations;
  const { go_test: _removed, ...withoutGoTest } = all;
  // @ts-expect-error go_test has no implementation
  const missing: Implementations = withoutGoTest;
  assert.ok(missing);
});

test("a Runner implementation whose run takes another tool's arguments does not compile", () => {
  const typed = { cargo_check: { capabilities: [], run: runFor<"cargo_check">() } };
  const mistyped = { cargo_check: { capabilities: [], run: runFor<"cargo_test">() } };
  // Assignability alone lets it through: cargo_test's arguments and cargo_check's are all optional.
  const assignable: Pick<Implementations, "cargo_check"> = mistyped;
  const exact: ExactlyTyped<typeof typed> = true;
  // @ts-expect-error cargo_check's run takes cargo_test's arguments
  const wrong: ExactlyTyped<typeof mistyped> = true;
  // A run for a tool with required arguments of its own is refused by assignability already.
  // @ts-expect-error read_files' run takes run_shell's arguments (command)
  const unassignable: Pick<Implementations, "read_files"> = { read_files: { capabilities: [], run: runFor<"run_shell">() } };
  assert.deepEqual([assignable, exact, wrong, unassignable].length, 4);
});
