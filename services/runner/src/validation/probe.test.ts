import assert from "node:assert/strict";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { scrubbedBaseEnv } from "../exec/child-env.js";
import { probeValidationCapabilities } from "./probe.js";

test("the toolchain probes run side by side without blocking the event loop; a toolchain that fails is not advertised", async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "wc-probe-"));
  try {
    // Each fake toolchain takes 2 s: one after another the probes would take at least 6 s.
    const tool = async (name: string, exit: number) => {
      await writeFile(path.join(dir, name), `#!/bin/sh\nsleep 2\nexit ${exit}\n`);
      await chmod(path.join(dir, name), 0o755);
    };
    await tool("python3", 0);
    await tool("go", 1);
    await tool("cargo", 0);
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 100);
    const started = performance.now();
    const found = await probeValidationCapabilities(`${dir}:${scrubbedBaseEnv().PATH as string}`);
    const elapsed = performance.now() - started;
    clearInterval(ticker);
    assert.deepEqual(found, ["validationNode", "validationPython", "validationRust"]);
    assert.ok(elapsed < 5_000, `probes took ${Math.round(elapsed)} ms`);
    assert.ok(ticks >= 5, `the event loop ran ${ticks} timer ticks while the probes ran`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
