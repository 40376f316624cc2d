/**
 * Test support (not part of the public surface; a *.test-support file, pruned from images with the tests): temp workspaces on the real filesystem,
 * removed when the test process ends.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after } from "node:test";
import { ToolFailureError, type ReasonCode, type ToolFailure } from "@webcodex/contracts";
import { createWorkspace } from "./workspace.js";
import type { ReadTextItem, Workspace, WorkspaceOptions } from "./types.js";

const created: string[] = [];
after(async () => {
  await Promise.all(created.map((dir) => rm(dir, { recursive: true, force: true })));
});

export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "wc-workspace-"));
  created.push(dir);
  return dir;
}

/** Writes files (relative path → content) under root, creating directories. */
export async function writeTree(root: string, files: Record<string, string | Buffer>): Promise<void> {
  for (const [relPath, content] of Object.entries(files)) {
    const target = path.join(root, relPath);
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, content);
  }
}

export async function tempWorkspace(
  files: Record<string, string | Buffer> = {},
  options: Omit<WorkspaceOptions, "root"> = {},
): Promise<{ root: string; ws: Workspace }> {
  const root = await tempDir();
  await writeTree(root, files);
  return { root, ws: createWorkspace({ root, ...options }) };
}

export function readText(root: string, relPath: string): Promise<string> {
  return readFile(path.join(root, relPath), "utf8");
}

/** Current read_revision of a text or binary file, as a model would get it from read_files. */
export async function revisionOf(ws: Workspace, relPath: string): Promise<string> {
  const [item] = (await ws.readFiles({ files: [{ path: relPath }] })).items;
  if (item === undefined || !item.success) throw new Error(`cannot read ${relPath}`);
  return item.read_revision;
}

export async function readItem(
  ws: Workspace,
  relPath: string,
  range: { start_line?: number; start_column?: number; end_line?: number } = {},
  max?: number,
): Promise<ReadTextItem> {
  const request = max === undefined ? { files: [{ path: relPath, ...range }] } : { files: [{ path: relPath, ...range }], max_bytes_per_file: max };
  const [item] = (await ws.readFiles(request)).items;
  if (item === undefined || !item.success || "binary" in item) throw new Error(`not a text item: ${relPath}`);
  return item;
}

export function git(cwd: string, ...args: string[]): string {
  return execFileSync(
    "git",
    ["-c", "user.email=test@example.com", "-c", "user.name=Test", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", ...args],
    {
      cwd,
      encoding: "utf8",
    },
  );
}

/** Awaits a whole-call failure and checks its reason code; returns the failure for more checks. */
export async function expectFailure(promise: Promise<unknown>, reason: ReasonCode): Promise<ToolFailure> {
  try {
    await promise;
  } catch (error) {
    if (!(error instanceof ToolFailureError)) throw error;
    assert.equal(error.failure.reason_code, reason, JSON.stringify(error.failure));
    return error.failure;
  }
  return assert.fail(`expected a ${reason} failure`);
}
