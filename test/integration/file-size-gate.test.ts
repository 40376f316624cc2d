// The file-size gate `make lint` runs: no file over 400 lines outside its reviewed allow-list,
// and no listed file past the size listed for it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = new URL("../../../", import.meta.url).pathname;
const script = join(root, "tools/scripts/check-file-size.mjs");
const lines = (n: number) => Array.from({ length: n - 1 }, (_, i) => `export const x${i} = ${i};`).join("\n") + "\n";

test("the gate passes on the tree", () => {
  const res = spawnSync(process.execPath, [script], { cwd: root, encoding: "utf8" });
  assert.equal(res.status, 0, res.stderr);
});

test("a planted oversize file, or a listed file grown past its size, fails the gate", () => {
  const dir = mkdtempSync(join(tmpdir(), "file-size-"));
  execFileSync("git", ["init", "-q"], { cwd: dir });
  const allowList = join(dir, "allow.json");
  writeFileSync(allowList, JSON.stringify({ "src/big.ts": 450 }));
  writeFileSync(join(dir, "small.ts"), lines(400));
  execFileSync("mkdir", ["-p", join(dir, "src")]);
  writeFileSync(join(dir, "src/big.ts"), lines(450));
  execFileSync("git", ["add", "-A"], { cwd: dir });
  const check = () => spawnSync(process.execPath, [script, "--allow-list", allowList], { cwd: dir, encoding: "utf8" });
  assert.equal(check().status, 0, check().stderr);

  writeFileSync(join(dir, "planted.ts"), lines(401));
  execFileSync("git", ["add", "planted.ts"], { cwd: dir });
  const planted = check();
  assert.equal(planted.status, 1);
  assert.match(planted.stderr, /planted\.ts: 401 lines, over 400 and not in the allow-list/);
  execFileSync("git", ["rm", "-q", "--cached", "planted.ts"], { cwd: dir });

  writeFileSync(join(dir, "src/big.ts"), lines(451));
  const grown = check();
  assert.equal(grown.status, 1);
  assert.match(grown.stderr, /src\/big\.ts: 451 lines, grew past its allowed 450/);

  // Shrinking passes and says the entry can come down.
  writeFileSync(join(dir, "src/big.ts"), lines(300));
  const shrunk = check();
  assert.equal(shrunk.status, 0, shrunk.stderr);
  assert.match(shrunk.stdout, /src\/big\.ts: 300 lines, allowed 450 \(no longer needs an entry\)/);
});
