/** Shared helpers for the exec tests: temp workspaces and spawner modes (a *.test-support file: built beside the tests, pruned from images with them); process-liveness checks are in process-probes.test-support.ts. */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { isToolFailureError } from "@webcodex/contracts";
import { createSpawnHost } from "./spawn-host.js";
import { createDirectSpawner, type Spawner } from "./spawner.js";

/** A fresh temp directory and its removal. */
export async function tempRoot(): Promise<{ root: string; cleanup: () => Promise<void> }> {
  const root = await mkdtemp(path.join(os.tmpdir(), "wc-exec-"));
  return { root, cleanup: () => rm(root, { recursive: true, force: true }) };
}

/** Polls `predicate` until it holds or `timeoutMs` passes; returns its last value. */
export async function eventually(predicate: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return true;
}

/** An assert.rejects validator for a ToolFailureError with the given reason_code. */
export function failsWith(reasonCode: string, detailCode?: string): (error: unknown) => boolean {
  return (error) =>
    isToolFailureError(error) && error.failure.reason_code === reasonCode && (detailCode === undefined || error.failure.detail_code === detailCode);
}

/** The ways the Runner can start programs, for tests that must hold for each. */
export const SPAWNER_MODES: ReadonlyArray<readonly [string, () => Spawner]> = [
  ["direct", () => createDirectSpawner()],
  ["spawn host", () => createSpawnHost()],
];
