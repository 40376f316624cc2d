/**
 * Git runs no program named by repository content when a read-only principal reads: each case
 * of the git matrix (test/support/git-matrix.ts) plants one config form whose program would
 * write a marker and leave a tagged process running, as a writer of the workspace could. A
 * read-only caller of `webcodex dev` then calls every tool that runs git
 * (read_workspace_changes, read_git_diff_hunks, read_git_review_summary) through a real MCP
 * client: each answers and sees the change, no marker exists, and no process is left behind.
 * test/security/up-git-matrix.test.ts runs the same matrix on `webcodex up`.
 */
import { after, before, describe, it } from "node:test";
import { randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { chmodSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { connectMcp, createProjectDir, firstProjectRef, killAll, startDevServer, tempDir } from "../support/index.js";
import type { DevServer } from "../support/index.js";
import { GIT_MATRIX, probeGitMatrixCase } from "../support/git-matrix.js";

const asRoot = process.getuid?.() === 0;
/** As a developer's checkout is when the server runs as root: owned by a user of its own (the Job user then). */
const CHECKOUT_UID = 4243;
const secret = (label: string) => `${label}-${randomBytes(16).toString("hex")}`;

describe("the git matrix, read by a read-only principal through every git tool", { skip: asRoot ? false : "needs root (the mode under test)" }, () => {
  let server: DevServer;
  let reader: Client;
  let readerProject: string;
  let root: string;
  const leftovers: number[] = [];

  before(async () => {
    root = createProjectDir({ "a.txt": "one\ntwo\n" }, { name: "gitmatrix" });
    chmodSync(dirname(root), 0o755);
    const writer = secret("writer");
    const readOnly = secret("reader");
    const tokensFile = join(tempDir("wcx-gm-tokens-"), "tokens.json");
    writeFileSync(
      tokensFile,
      JSON.stringify({
        tokens: [
          { token: writer, client_id: "acme", subject: "writer" },
          { token: readOnly, client_id: "acme", subject: "reader", admission_profile: "read_only" },
        ],
      }),
      { mode: 0o600 },
    );
    execFileSync("chown", ["-R", `${CHECKOUT_UID}:${CHECKOUT_UID}`, root]);
    server = await startDevServer({ projectDir: root, dataDir: tempDir("wcx-gm-data-"), tokensFile });
    reader = await connectMcp(server.mcpUrl, readOnly);
    readerProject = await firstProjectRef(reader);
  });

  after(async () => {
    killAll(leftovers);
    await reader?.close();
    await server?.stop();
  });

  for (const c of GIT_MATRIX) {
    it(`${c.name}: 0 markers, 0 processes left behind`, () =>
      probeGitMatrixCase(c, { root, owner: `${CHECKOUT_UID}:${CHECKOUT_UID}`, reader, project: readerProject, leftovers }));
  }
});
