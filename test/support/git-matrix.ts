/**
 * The git matrix, shared by its `webcodex dev` and `webcodex up` variants: each case plants one
 * config form (subsections holding `=`, `.` or quotes; include and includeIf; config.worktree;
 * core.fsmonitor; core.hooksPath and .git/hooks; textconv; an external diff driver;
 * diff.external; pagers; filter drivers named from .gitattributes and .git/info/attributes)
 * whose program would write a marker and leave a tagged process running, as a writer of the
 * workspace could. `probeGitMatrixCase` then has a read-only caller call every tool that runs
 * git (read_workspace_changes, read_git_diff_hunks, read_git_review_summary): each answers and
 * sees the change, no marker exists, and no process is left behind.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { callTool } from "./mcp.js";
import { hostPids, killAll } from "./processes.js";

export interface GitMatrixCase {
  name: string;
  /** Plants the mechanism in `root`; `prog` is a shell command that writes the marker and leaves a process. */
  plant: (root: string, prog: string) => void;
  /** Plain git status or diff runs the planted program (default; checked, so the case is known to be armed). */
  plainGitRuns?: false;
}

const git = (root: string, ...args: string[]) =>
  execFileSync("git", ["-c", "safe.directory=*", "-c", "user.email=t@example.com", "-c", "user.name=t", ...args], { cwd: root, stdio: "ignore" });
const appendConfig = (root: string, text: string) => appendFileSync(join(root, ".git", "config"), text);
const attributes = (root: string, text: string) => writeFileSync(join(root, ".gitattributes"), text);
/** Config-file value quoting: backslashes and double quotes escaped, the whole value quoted. */
const q = (value: string) => `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
const textconv = (prog: string) => q(`sh -c '${prog}; cat "$1"' --`);
const filter = (prog: string) => q(`${prog}; cat`);

export const GIT_MATRIX: readonly GitMatrixCase[] = [
  ...["x=y", "x.y", "x=y.clean", "a.b=c.d"].map((sub): GitMatrixCase => ({
    name: `filter and diff drivers in a subsection holding ${JSON.stringify(sub)}`,
    plant: (root, prog) => {
      appendConfig(root, `[filter ${q(sub)}]\n\tclean = ${filter(prog)}\n\tsmudge = ${filter(prog)}\n[diff ${q(sub)}]\n\ttextconv = ${textconv(prog)}\n`);
      attributes(root, `*.txt filter=${sub} diff=${sub}\n`);
    },
  })),
  {
    name: "drivers in subsections holding quotes and spaces (and the names their parts spell)",
    plant: (root, prog) => {
      for (const sub of ['x"y', "x y=z.clean", 'e" clean = x', "x"]) {
        appendConfig(root, `[filter ${q(sub)}]\n\tclean = ${filter(prog)}\n[diff ${q(sub)}]\n\ttextconv = ${textconv(prog)}\n\tcommand = ${q(prog)}\n`);
      }
      attributes(root, "*.txt filter=x diff=x\n");
    },
  },
  {
    name: "a filter process driver (required) named from .git/info/attributes",
    plant: (root, prog) => {
      appendConfig(root, `[filter "p"]\n\tprocess = ${q(prog)}\n\trequired = true\n`);
      mkdirSync(join(root, ".git", "info"), { recursive: true });
      writeFileSync(join(root, ".git", "info", "attributes"), "* filter=p\n");
    },
  },
  {
    name: "drivers in a file [include] names",
    plant: (root, prog) => {
      writeFileSync(
        join(root, "inc.cfg"),
        `[filter "inc"]\n\tclean = ${filter(prog)}\n[diff "inc"]\n\ttextconv = ${textconv(prog)}\n[core]\n\tfsmonitor = ${q(prog)}\n`,
      );
      appendConfig(root, `[include]\n\tpath = ${join(root, "inc.cfg")}\n`);
      attributes(root, "*.txt filter=inc diff=inc\n");
    },
  },
  {
    name: "drivers in a file [includeIf] names",
    plant: (root, prog) => {
      writeFileSync(
        join(root, "cond.cfg"),
        `[filter "cond"]\n\tclean = ${filter(prog)}\n[diff "cond"]\n\ttextconv = ${textconv(prog)}\n[core]\n\tpager = ${q(prog)}\n`,
      );
      appendConfig(
        root,
        `[includeIf "gitdir:${root}/"]\n\tpath = ${join(root, "cond.cfg")}\n[includeIf "onbranch:main"]\n\tpath = ${join(root, "cond.cfg")}\n`,
      );
      attributes(root, "*.txt filter=cond diff=cond\n");
    },
  },
  {
    name: "drivers in config.worktree",
    plant: (root, prog) => {
      git(root, "config", "extensions.worktreeConfig", "true");
      writeFileSync(
        join(root, ".git", "config.worktree"),
        `[filter "wt"]\n\tclean = ${filter(prog)}\n[diff "wt"]\n\ttextconv = ${textconv(prog)}\n[core]\n\tfsmonitor = ${q(prog)}\n\thooksPath = ${join(root, "wthooks")}\n`,
      );
      attributes(root, "*.txt filter=wt diff=wt\n");
    },
  },
  {
    name: "core.fsmonitor",
    plant: (root, prog) => appendConfig(root, `[core]\n\tfsmonitor = ${q(prog)}\n`),
  },
  {
    name: "core.hooksPath and .git/hooks",
    plant: (root, prog) => {
      for (const dir of [join(root, "hooks"), join(root, ".git", "hooks")]) {
        mkdirSync(dir, { recursive: true });
        for (const hook of ["post-checkout", "post-index-change", "pre-commit", "reference-transaction", "fsmonitor-watchman"]) {
          writeFileSync(join(dir, hook), `#!/bin/sh\n${prog}\n`, { mode: 0o755 });
        }
      }
      appendConfig(root, `[core]\n\thooksPath = ${join(root, "hooks")}\n`);
    },
  },
  {
    name: "a textconv driver in .gitattributes",
    plant: (root, prog) => {
      appendConfig(root, `[diff "tc"]\n\ttextconv = ${textconv(prog)}\n\tcachetextconv = false\n`);
      attributes(root, "*.txt diff=tc\n");
    },
  },
  {
    name: "an external diff driver (diff.<x>.command) and diff.external",
    plant: (root, prog) => {
      appendConfig(root, `[diff "ext"]\n\tcommand = ${q(prog)}\n[diff]\n\texternal = ${q(prog)}\n`);
      attributes(root, "*.txt diff=ext\n");
    },
  },
  {
    name: "pagers (core.pager, pager.<cmd>) and program-valued keys",
    // A pager runs only on a terminal; helpers and gpg only on fetches and signed commits.
    plainGitRuns: false,
    plant: (root, prog) => {
      appendConfig(
        root,
        `[core]\n\tpager = ${q(prog)}\n\tsshCommand = ${q(prog)}\n\taskPass = ${q(prog)}\n[pager]\n\tdiff = ${q(prog)}\n\tstatus = ${q(prog)}\n\tlog = ${q(prog)}\n\tshow = ${q(prog)}\n` +
          `[credential]\n\thelper = ${q(`!${prog}`)}\n[gpg]\n\tprogram = ${q(prog)}\n[log]\n\tshowSignature = true\n`,
      );
    },
  },
];

/** Where a case is probed: a workspace on the host, who owns it, and a read-only caller's ref for it. */
export interface GitMatrixTarget {
  /** The workspace's directory on the host (emptied and made a fresh repository for each case). */
  root: string;
  /** The owner its files are given back to after planting ("uid:gid"): as the workspace's writer leaves them. */
  owner: string;
  reader: Client;
  /** The read-only caller's own ref for the project (refs are per principal). */
  project: string;
  /** Pids the test kills at the end, whatever happens. */
  leftovers: number[];
}

/** A fresh repository with one commit, the case planted, and changes to observe. */
function reset(root: string, owner: string, c: GitMatrixCase, prog: string): void {
  for (const entry of readdirSync(root)) rmSync(join(root, entry), { recursive: true, force: true });
  writeFileSync(join(root, "a.txt"), "one\ntwo\n");
  writeFileSync(join(root, "b.txt"), "x\n");
  // Unchanged by the case: its stat is made stale before plain git runs, so git status
  // refreshes and writes the index (and fires the index hooks) every time, not only when racy.
  writeFileSync(join(root, "same.txt"), "same\n");
  git(root, "init", "-q", "-b", "main");
  git(root, "add", "-A");
  git(root, "commit", "-qm", "init");
  c.plant(root, prog);
  writeFileSync(join(root, "a.txt"), "one\n2\n");
  writeFileSync(join(root, "b.txt"), "y\n");
  writeFileSync(join(root, "new.txt"), "fresh\n");
  execFileSync("chown", ["-R", owner, root]);
}

/**
 * Plants case `c` in the target's workspace, checks that the planted program works and (unless
 * the case says otherwise) that plain git runs it, then reads through all three git tools as
 * the read-only caller: every read answers and sees the change, no marker, no process left.
 */
export async function probeGitMatrixCase(c: GitMatrixCase, t: GitMatrixTarget): Promise<void> {
  const tag = `97.${String(Math.floor(Math.random() * 1e9)).padStart(9, "1")}`;
  const marker = join(t.root, ".git", `marker-${randomBytes(4).toString("hex")}`);
  // Writes the marker and leaves a process (tagged) that would outlive the read.
  const prog = `touch ${marker}; (setsid sleep ${tag} </dev/null >/dev/null 2>&1 &); true`;
  reset(t.root, t.owner, c, prog);
  // The planted program itself works: run by hand, it writes its marker (then it is removed).
  execFileSync("sh", ["-c", prog]);
  assert.ok(existsSync(marker), "the planted program writes its marker when run");
  rmSync(marker);
  if (c.plainGitRuns !== false) {
    // And plain git (status, diff) on this repository does run it: the case is armed.
    const later = new Date(Date.now() + 5_000);
    utimesSync(join(t.root, "same.txt"), later, later);
    for (const args of [["status"], ["diff"], ["diff", "HEAD"]]) {
      try {
        execFileSync("git", ["-c", "safe.directory=*", ...args], {
          cwd: t.root,
          stdio: "ignore",
          env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: t.root },
        });
      } catch {
        // A required filter that writes nothing fails git; it ran all the same.
      }
    }
    assert.ok(existsSync(marker), "plain git runs the planted program");
    execFileSync("chown", ["-R", t.owner, t.root]);
    rmSync(marker);
  }
  t.leftovers.push(...hostPids(tag));
  killAll(hostPids(tag));

  const read = (tool: string) => callTool(t.reader, "call_runtime_tool", { tool, arguments: { project: t.project } });
  const changes = await read("read_workspace_changes");
  assert.equal(changes.isError, false, JSON.stringify(changes.result).slice(0, 800));
  const paths = (changes.result["changes"] as Array<{ path: string }>).map((ch) => ch.path);
  assert.ok(paths.includes("a.txt") && paths.includes("new.txt"), `the read observed the change: ${paths.join(",")}`);
  const hunks = await read("read_git_diff_hunks");
  assert.equal(hunks.isError, false, JSON.stringify(hunks.result).slice(0, 800));
  assert.match(JSON.stringify(hunks.result["hunks"]), /\+2/, "the diff shows the change to a.txt");
  const summary = await read("read_git_review_summary");
  assert.equal(summary.isError, false, JSON.stringify(summary.result).slice(0, 800));
  assert.ok(JSON.stringify(summary.result["files"]).includes("a.txt"), "the summary lists a.txt");

  // Anything started by git would have finished by now; a stray process gets a moment anyway
  // (a fixed wait: "nothing appeared within 300 ms").
  await new Promise((r) => setTimeout(r, 300));
  const stray = hostPids(tag);
  t.leftovers.push(...stray);
  assert.equal(existsSync(marker), false, "a program named by the repository ran during a read-only call");
  assert.deepEqual(stray, [], "a process started by the repository's config outlived the read");
}
