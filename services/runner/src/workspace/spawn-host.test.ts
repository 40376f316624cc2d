import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { after, describe, it } from "node:test";
import { ReasonCode } from "@webcodex/contracts";
import { createSpawnHost } from "../exec/spawn-host.js";
import { expectFailure, git, tempWorkspace } from "./workspace.test-support.js";
import { createWorkspace } from "./workspace.js";

describe("workspace through the spawn host", () => {
  const host = createSpawnHost();
  after(() => host.close());

  it("lists, searches and reviews git changes exactly as with direct spawning", async () => {
    const { root, ws: direct } = await tempWorkspace({
      ".gitignore": "*.log\n",
      "src/a.ts": "export const Foo = 1;\nconst foo = Foo + 1;\n",
      "src/b.ts": "foo(bar)\n",
      "debug.log": "foo log\n",
    });
    git(root, "init", "-q");
    git(root, "add", "-A");
    git(root, "commit", "-q", "-m", "init");
    await writeFile(path.join(root, "src/a.ts"), "export const Foo = 2;\n");
    await writeFile(path.join(root, "new.txt"), "n1\nn2\n");
    const hosted = createWorkspace({ root, spawner: host });

    assert.deepEqual(await hosted.listProjectFiles({}), await direct.listProjectFiles({}));
    const queries = {
      queries: [
        { pattern: "foo", case_sensitive: false },
        { pattern: "Fo+", regex: true },
      ],
    };
    assert.deepEqual(await hosted.searchProjectTexts(queries), await direct.searchProjectTexts(queries));
    const changes = await hosted.readWorkspaceChanges({});
    assert.deepEqual(changes, await direct.readWorkspaceChanges({}));
    assert.equal(changes.total_changes, 2);
    assert.deepEqual(await hosted.readGitDiffHunks({}), await direct.readGitDiffHunks({}));
    assert.deepEqual(await hosted.readGitReviewSummary({}), await direct.readGitReviewSummary({}));
    assert.ok(host.hostPid !== undefined && !host.fellBack, "the host did the spawning");
  });

  it("keeps git's failure mapping: outside a repository, and an unknown base", async () => {
    const { root } = await tempWorkspace({ "a.txt": "a\n" });
    const hosted = createWorkspace({ root, spawner: host });
    await expectFailure(hosted.readWorkspaceChanges({}), ReasonCode.notAGitRepository);
    git(root, "init", "-q");
    await expectFailure(hosted.readGitReviewSummary({ base: "no-such-branch" }), ReasonCode.invalidValue);
  });

  it("reports a missing rg as dependency_unavailable", async () => {
    const { root } = await tempWorkspace({ "a.txt": "a\n" });
    const hosted = createWorkspace({ root, spawner: host, rgPath: "/nonexistent/rg" });
    await expectFailure(hosted.listProjectFiles({}), ReasonCode.dependencyUnavailable);
  });
});
