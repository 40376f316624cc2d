import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Test hooks (GatewayTestHooks) reach the gateway only from a test harness's launcher, never
 * from a service's settings: no source a deployment runs names a WEBCODEX_TEST_* variable, so
 * no environment (a Helm chart's extraEnv included) can switch one on.
 */
const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
const shipped = ["libs", "services", "tools/cli"];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" || e.name === "dist" || e.name === "gen" ? [] : sources(path);
    return /\.ts$/.test(e.name) && !/\.test(-support)?\.ts$/.test(e.name) ? [path] : [];
  });
}

describe("test hooks", () => {
  it("no shipped source reads a WEBCODEX_TEST_* variable", () => {
    const files = shipped.flatMap((d) => sources(join(repoRoot, d)));
    assert.ok(files.length > 100, `found the sources (${files.length})`);
    const offenders = files.filter((f) => readFileSync(f, "utf8").includes("WEBCODEX_TEST_")).map((f) => f.slice(repoRoot.length));
    assert.deepEqual(offenders, []);
  });
});
