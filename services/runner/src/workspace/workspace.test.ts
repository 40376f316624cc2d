import assert from "node:assert/strict";
import { mkdir, rename } from "node:fs/promises";
import { describe, it } from "node:test";
import { ReasonCode } from "@webcodex/contracts";
import { expectFailure, tempDir } from "./workspace.test-support.js";
import { createWorkspace } from "./workspace.js";

describe("workspace root identity", () => {
  it("is stable for one directory and changes when another directory takes its place", async () => {
    const parent = await tempDir();
    const root = `${parent}/project`;
    await mkdir(root);
    const ws = createWorkspace({ root });
    const first = await ws.rootIdentity();
    assert.equal(await ws.rootIdentity(), first);
    assert.match(first, /^sha256:[0-9a-f]{64}$/);
    await rename(root, `${parent}/old`);
    await mkdir(root);
    assert.notEqual(await ws.rootIdentity(), first);
  });

  it("a missing root is path_not_found, not an internal error", async () => {
    const ws = createWorkspace({ root: `${await tempDir()}/absent` });
    await expectFailure(ws.rootIdentity(), ReasonCode.pathNotFound);
    await expectFailure(ws.readFiles({ files: [{ path: "a" }] }), ReasonCode.pathNotFound);
  });
});
