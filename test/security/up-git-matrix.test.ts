/**
 * The git matrix (test/support/git-matrix.ts) on `webcodex up`, as root with up's default data
 * dir and two tenants: a writer of tenant acme creates a project shared with its tenant, and
 * each case plants its config form in that project's workspace (a fresh repository owned by the
 * project's uid, as its own Jobs would leave it). A read-only principal of the same tenant then
 * calls read_workspace_changes, read_git_diff_hunks and read_git_review_summary through up's
 * gateway with a real MCP client: each answers and sees the change, no marker exists, and no
 * process is left behind.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, lstatSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { detectSandbox } from "@webcodex/runner";
import { callTool, connectMcp, killAll, startRootUp } from "../support/index.js";
import type { RootUp } from "../support/index.js";
import { createProject, upWorkspaces } from "../support/attacks.js";
import { GIT_MATRIX, probeGitMatrixCase } from "../support/git-matrix.js";
import type { GitMatrixTarget } from "../support/git-matrix.js";

const asRoot = process.getuid?.() === 0;
const sandbox = detectSandbox();
const skip = !asRoot ? "needs root (the mode under test)" : sandbox.available ? false : `no sandbox here: ${sandbox.problem}`;
const secret = (label: string) => `${label}-${randomBytes(12).toString("hex")}`;

describe("the git matrix on webcodex up, read by a read-only principal of the project's tenant", { skip, timeout: 600_000 }, () => {
  let stack: RootUp;
  let writer: Client;
  let reader: Client;
  let target: GitMatrixTarget;
  const leftovers: number[] = [];

  before(async () => {
    const tokens = { writer: secret("writer"), reader: secret("reader"), other: secret("other") };
    stack = await startRootUp([
      { token: tokens.writer, client_id: "acme", subject: "writer" },
      { token: tokens.reader, client_id: "acme", subject: "reader", admission_profile: "read_only" },
      { token: tokens.other, client_id: "globex", subject: "other" },
    ]);
    [writer, reader] = await Promise.all([connectMcp(stack.up.mcpUrl, tokens.writer), connectMcp(stack.up.mcpUrl, tokens.reader)]);
    const created = await createProject(writer, "gitmatrix", { empty: {} }, { visibility: "tenant" });
    assert.equal(created.isError, false, JSON.stringify(created.result));
    const dirs = upWorkspaces(stack.workspaces);
    assert.equal(dirs.length, 1, dirs.join(","));
    const root = dirs[0]!;
    const { uid, gid } = lstatSync(root);
    assert.ok(uid >= 200_000_000, `the workspace belongs to a project uid (${uid})`);
    const listed = await callTool(reader, "list_projects", {});
    const project = (listed.result["projects"] as Array<Record<string, unknown>>).find((p) => p["name"] === "gitmatrix")?.["project_ref"];
    assert.ok(typeof project === "string" && project !== "", `the reader sees the tenant's project: ${JSON.stringify(listed.result)}`);
    target = { root, owner: `${uid}:${gid}`, reader, project, leftovers };
  });

  after(async () => {
    killAll(leftovers);
    await Promise.all([writer?.close(), reader?.close()]);
    await stack?.close();
  });

  it("the reader is admitted read-only: a run_shell of its own is refused and writes nothing", async () => {
    const marker = `ro-${randomBytes(4).toString("hex")}`;
    const ran = await callTool(reader, "run_shell", { project: target.project, command: `touch ${marker}`, wait_ms: 10_000 });
    assert.equal(ran.isError, true, JSON.stringify(ran.result).slice(0, 500));
    assert.equal(ran.result["reason_code"], "tool_not_admitted", JSON.stringify(ran.result).slice(0, 500));
    assert.equal(existsSync(join(target.root, marker)), false);
  });

  for (const c of GIT_MATRIX) {
    it(`${c.name}: 0 markers, 0 processes left behind`, () => probeGitMatrixCase(c, target));
  }
});
