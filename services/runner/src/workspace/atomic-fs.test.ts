import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chownSync, mkdirSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { makeParents } from "./atomic-fs.js";

/**
 * A Runner running as root gives the directories it makes for an edit the owner of the
 * directory they are made in (the Job user's). A Job of that workspace swapping a directory
 * just made for a symlink to a root-only directory must never get that directory handed over.
 */
describe("atomic-fs as root", { skip: process.getuid?.() === 0 ? false : "needs root (ownership)" }, () => {
  it("a Job flipping the directory makeParents just made to a symlink never gets the target handed over", async () => {
    const base = mkdtempSync(path.join(os.tmpdir(), "wcx-afs-"));
    const ws = path.join(base, "ws");
    mkdirSync(ws);
    chownSync(ws, 5000, 5000);
    const victim = path.join(base, "victim");
    mkdirSync(victim, { mode: 0o700 });
    const report = path.join(base, "flips");
    const script = `const fs = require("node:fs"); const [d, victim, report] = process.argv.slice(1); let flips = 0; const end = Date.now() + 4000;
      while (Date.now() < end) { try { fs.renameSync(d, d + ".x"); fs.symlinkSync(victim, d); flips++; fs.unlinkSync(d); fs.rmSync(d + ".x", { recursive: true, force: true }); } catch {} }
      fs.writeFileSync(report, String(flips));`;
    const flipper = spawn(process.execPath, ["-e", script, path.join(ws, "a"), victim, report], { stdio: "ignore" });
    const exited = new Promise((r) => flipper.once("exit", r));
    let done = false;
    void exited.then(() => (done = true));
    let calls = 0;
    let refused = 0;
    while (!done) {
      calls++;
      try {
        await makeParents(path.join(ws, "a"));
      } catch {
        refused++;
      }
      assert.equal(statSync(victim).uid, 0, `after ${calls} calls the symlink's target was handed over`);
    }
    const flips = Number(readFileSync(report, "utf8"));
    assert.ok(flips > 100 && calls > 100, `the race ran: ${flips} flips, ${calls} calls (${refused} refused)`);
    assert.equal(statSync(victim).uid, 0);
    assert.equal(statSync(victim).gid, 0);
  });
});
