import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { appendFile, chmod, mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "node:test";
import { git, tempDir, tempWorkspace, writeTree } from "./workspace.test-support.js";
import { gitEnv } from "./git-cli.js";
import type { Workspace } from "./types.js";

/**
 * A repository is untrusted input: a writer of the workspace can plant config that names a
 * program, and a read by anyone (read_workspace_changes, read_git_diff_hunks,
 * read_git_review_summary) must never run it. Each case plants one mechanism whose program
 * would create a marker file, then runs every git observation and checks the marker is absent.
 */
async function plantedRepo(plant: (root: string, marker: string) => Promise<void>): Promise<{ ws: Workspace; marker: string; root: string }> {
  const { root, ws } = await tempWorkspace({ "a.txt": "one\ntwo\n", "b.bin": "x\n" });
  git(root, "init", "-q");
  git(root, "add", "-A");
  git(root, "commit", "-q", "-m", "init");
  const marker = path.join(await tempDir(), "ran");
  await plant(root, marker);
  // A change to observe, so diff-family commands have content to filter or convert.
  await writeFile(path.join(root, "a.txt"), "one\n2\n");
  await writeFile(path.join(root, "new.txt"), "fresh\n");
  return { ws, marker, root };
}

async function observeAll(ws: Workspace): Promise<void> {
  await ws.readWorkspaceChanges({});
  await ws.readGitDiffHunks({});
  await ws.readGitReviewSummary({});
}

const touch = (marker: string) => `touch ${JSON.stringify(marker)}`;

async function assertNeverRuns(plant: (root: string, marker: string) => Promise<void>): Promise<void> {
  const { ws, marker } = await plantedRepo(plant);
  await observeAll(ws);
  assert.equal(existsSync(marker), false, "a program from the repository's config ran during a read");
}

describe("git reads treat the repository as untrusted", () => {
  it("a filter.<x>.clean driver with .gitattributes never runs", async () => {
    await assertNeverRuns(async (root, marker) => {
      git(root, "config", "filter.evil.clean", `${touch(marker)}; cat`);
      await writeFile(path.join(root, ".gitattributes"), "* filter=evil\n");
    });
  });

  it("a filter.<x>.process driver (required) never runs and reads still work", async () => {
    const { ws, marker } = await plantedRepo(async (root, m) => {
      git(root, "config", "filter.evil.process", touch(m));
      git(root, "config", "filter.evil.required", "true");
      await mkdir(path.join(root, ".git", "info"), { recursive: true });
      await writeFile(path.join(root, ".git", "info", "attributes"), "* filter=evil\n");
    });
    const changes = await ws.readWorkspaceChanges({});
    assert.ok(changes.changes.some((c) => c.path === "a.txt"));
    await observeAll(ws);
    assert.equal(existsSync(marker), false);
  });

  it("a diff.<x>.textconv driver never runs", async () => {
    await assertNeverRuns(async (root, marker) => {
      git(root, "config", "diff.evil.textconv", `sh -c '${touch(marker)}; cat "$1"' --`);
      await writeFile(path.join(root, ".gitattributes"), "* diff=evil\n");
    });
  });

  it("a diff.<x>.command external driver never runs", async () => {
    await assertNeverRuns(async (root, marker) => {
      git(root, "config", "diff.evil.command", touch(marker));
      await writeFile(path.join(root, ".gitattributes"), "* diff=evil\n");
    });
  });

  it("diff.external never runs", async () => {
    await assertNeverRuns(async (root, marker) => {
      git(root, "config", "diff.external", touch(marker));
    });
  });

  it("a core.fsmonitor hook never runs", async () => {
    await assertNeverRuns(async (root, marker) => {
      git(root, "config", "core.fsmonitor", touch(marker));
    });
  });

  it("core.pager and pager.<cmd> never run", async () => {
    await assertNeverRuns(async (root, marker) => {
      git(root, "config", "core.pager", touch(marker));
      git(root, "config", "pager.diff", touch(marker));
      git(root, "config", "pager.status", touch(marker));
    });
  });

  it("hooks in .git/hooks and core.hooksPath never run", async () => {
    await assertNeverRuns(async (root, marker) => {
      const hooks = path.join(root, "custom-hooks");
      for (const dir of [path.join(root, ".git", "hooks"), hooks]) {
        await mkdir(dir, { recursive: true });
        for (const name of ["post-index-change", "reference-transaction", "post-checkout", "pre-auto-gc"]) {
          await writeFile(path.join(dir, name), `#!/bin/sh\n${touch(marker)}\n`);
          await chmod(path.join(dir, name), 0o755);
        }
      }
      git(root, "config", "core.hooksPath", hooks);
    });
  });

  it("credential helpers, ssh commands and gpg programs are emptied", async () => {
    await assertNeverRuns(async (root, marker) => {
      git(root, "config", "credential.helper", `!${touch(marker)}`);
      git(root, "config", "core.sshCommand", touch(marker));
      git(root, "config", "gpg.program", touch(marker));
      git(root, "config", "log.showSignature", "true");
    });
  });

  it("a driver defined in a file the repository config includes never runs", async () => {
    await assertNeverRuns(async (root, marker) => {
      const included = path.join(root, "included.cfg");
      await writeFile(included, `[filter "evil"]\n\tclean = ${touch(marker)}; cat\n`);
      await appendFile(path.join(root, ".git", "config"), `[include]\n\tpath = ${included}\n`);
      await writeFile(path.join(root, ".gitattributes"), "* filter=evil\n");
    });
  });

  for (const name of ["x=y", "x.y", 'x"y', "x y=z.clean"]) {
    it(`a filter driver whose subsection holds ${JSON.stringify(name)} never runs`, async () => {
      await assertNeverRuns(async (root, marker) => {
        const quoted = name.replace(/\\/g, "\\\\").replace(/"/g, '\\"');
        await appendFile(path.join(root, ".git", "config"), `[filter "${quoted}"]\n\tclean = ${touch(marker)}; cat\n\tsmudge = ${touch(marker)}; cat\n`);
        await appendFile(path.join(root, ".git", "config"), `[diff "${quoted}"]\n\ttextconv = sh -c '${touch(marker)}; cat "$1"' --\n`);
        const attr = name.includes(" ") || name.includes('"') ? "" : `b.bin filter=${name} diff=${name}\na.txt filter=${name} diff=${name}\n`;
        await writeFile(path.join(root, ".gitattributes"), attr || "* filter=x diff=x\n");
      });
    });
  }

  it("a driver defined through includeIf never runs", async () => {
    await assertNeverRuns(async (root, marker) => {
      const included = path.join(root, "cond.cfg");
      await writeFile(included, `[filter "evil"]\n\tclean = ${touch(marker)}; cat\n[core]\n\tfsmonitor = ${touch(marker)}\n`);
      await appendFile(path.join(root, ".git", "config"), `[includeIf "gitdir:${root}/"]\n\tpath = ${included}\n`);
      await writeFile(path.join(root, ".gitattributes"), "* filter=evil\n");
    });
  });

  it("a driver defined in config.worktree never runs", async () => {
    await assertNeverRuns(async (root, marker) => {
      git(root, "config", "extensions.worktreeConfig", "true");
      await writeFile(
        path.join(root, ".git", "config.worktree"),
        `[filter "evil"]\n\tclean = ${touch(marker)}; cat\n[diff "evil"]\n\ttextconv = sh -c '${touch(marker)}; cat "$1"' --\n`,
      );
      await writeFile(path.join(root, ".gitattributes"), "* filter=evil diff=evil\n");
    });
  });

  it("the user's global config is not read", async () => {
    const home = await tempDir();
    const saved = process.env["HOME"];
    process.env["HOME"] = home;
    try {
      await assertNeverRuns(async (root, marker) => {
        await writeTree(home, { ".gitconfig": `[core]\n\tfsmonitor = ${touch(marker)}\n` });
        await writeFile(path.join(root, ".gitattributes"), "");
      });
    } finally {
      if (saved === undefined) delete process.env["HOME"];
      else process.env["HOME"] = saved;
    }
  });

  it("git's environment holds no Runner credential and ignores system and global config", () => {
    process.env["WEBCODEX_RUNNER_TOKEN"] = "probe-secret";
    process.env["GIT_DIR"] = "/elsewhere";
    try {
      const env = gitEnv();
      assert.equal(Object.values(env).includes("probe-secret"), false);
      assert.equal(env["GIT_DIR"], undefined);
      assert.equal(env["GIT_CONFIG_NOSYSTEM"], "1");
      assert.equal(env["GIT_CONFIG_GLOBAL"], "/dev/null");
    } finally {
      delete process.env["WEBCODEX_RUNNER_TOKEN"];
      delete process.env["GIT_DIR"];
    }
  });
});
