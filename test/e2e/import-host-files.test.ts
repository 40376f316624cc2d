/**
 * import_host_files through the real path (MCP SDK client -> gateway -> broker -> Runner):
 * a 2 MiB binary round-trips byte-exact; every bad input fails closed with the project tree
 * unchanged (a valid file in the same call is not written either); success is sparse.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { callTool, openDevProject } from "../support/index.js";
import type { DevProject } from "../support/index.js";

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** Every entry under `root` with a hash of its bytes (directories as "dir"). */
function snapshot(root: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string) => {
    for (const name of readdirSync(join(root, rel))) {
      const child = rel ? `${rel}/${name}` : name;
      const info = statSync(join(root, child));
      if (info.isDirectory()) {
        out.set(child, "dir");
        walk(child);
      } else out.set(child, sha256(readFileSync(join(root, child))));
    }
  };
  walk("");
  return out;
}

describe("import_host_files", () => {
  let dev: DevProject;
  before(async () => {
    dev = await openDevProject({ "notes.txt": "original notes\n", "src/keep.ts": "export {};\n" }, { name: "import-demo" });
  });
  after(async () => {
    await dev?.close();
  });
  const call = (files: unknown[]) => callTool(dev.client, "import_host_files", { project: dev.project, files });

  it("is listed directly (tools/list) for a generic Host", async () => {
    const { tools } = await dev.client.listTools();
    assert.ok(tools.some((t) => t.name === "import_host_files"));
  });

  it("a 2 MiB binary round-trips byte-exact (by hash); the result is sparse and its read_revision is what read_files reports", async () => {
    const bytes = randomBytes(2 * 1024 * 1024);
    const res = await call([{ path: "assets/blob.bin", content_base64: bytes.toString("base64") }]);
    assert.equal(res.isError, false, JSON.stringify(res.result));
    assert.deepEqual(Object.keys(res.result), ["files"]);
    const [item] = res.result["files"] as Array<Record<string, unknown>>;
    assert.deepEqual(Object.keys(item ?? {}).sort(), ["bytes", "path", "read_revision"]);
    assert.equal(item?.["path"], "assets/blob.bin");
    assert.equal(item?.["bytes"], bytes.length);
    assert.equal(sha256(readFileSync(join(dev.projectDir, "assets/blob.bin"))), sha256(bytes));
    const read = await callTool(dev.client, "read_files", { project: dev.project, files: [{ path: "assets/blob.bin" }] });
    assert.equal((read.result["items"] as Array<Record<string, unknown>>)[0]?.["read_revision"], item?.["read_revision"]);
  });

  it("UTF-8 content and several files in one call; replacing needs overwrite:true and the current revision", async () => {
    const res = await call([
      { path: "a.txt", content: "héllo\n" },
      { path: "deep/new/b.txt", content: "b\n" },
    ]);
    assert.equal(res.isError, false, JSON.stringify(res.result));
    assert.deepEqual(
      (res.result["files"] as Array<Record<string, unknown>>).map((f) => [f["path"], f["bytes"]]),
      [
        ["a.txt", 7],
        ["deep/new/b.txt", 2],
      ],
    );
    assert.equal(readFileSync(join(dev.projectDir, "a.txt"), "utf8"), "héllo\n");

    const read = await callTool(dev.client, "read_files", { project: dev.project, files: [{ path: "notes.txt" }] });
    const revision = (read.result["items"] as Array<Record<string, unknown>>)[0]?.["read_revision"];
    const replaced = await call([{ path: "notes.txt", content: "new notes\n", overwrite: true, expected_read_revision: revision }]);
    assert.equal(replaced.isError, false, JSON.stringify(replaced.result));
    assert.equal((replaced.result["files"] as Array<Record<string, unknown>>)[0]?.["replaced"], true);
    assert.equal(readFileSync(join(dev.projectDir, "notes.txt"), "utf8"), "new notes\n");
  });

  describe("bad input fails closed with the file system unchanged", () => {
    // Each bad file travels with a valid one: the valid one must not be written either.
    const good = { path: "should-not-exist.txt", content: "x\n" };
    const bigText = (n: number) => "a".repeat(n);
    const cases: Array<{ name: string; files: () => Promise<unknown[]> | unknown[]; reason: string; detail?: string }> = [
      { name: "bad base64", files: () => [good, { path: "bad.bin", content_base64: "not base64!" }], reason: "invalid_value", detail: "invalid_base64" },
      {
        name: "base64 with a wrong length",
        files: () => [good, { path: "bad.bin", content_base64: "QUJD0" }],
        reason: "invalid_value",
        detail: "invalid_base64",
      },
      { name: "a path escape", files: () => [good, { path: "../escaped.txt", content: "x" }], reason: "path_outside_project" },
      { name: "an absolute path", files: () => [good, { path: "/tmp/escaped.txt", content: "x" }], reason: "path_outside_project" },
      { name: "a directory target", files: () => [good, { path: "src", content: "x", overwrite: true }], reason: "not_a_file" },
      { name: "a sensitive path", files: () => [good, { path: ".git/hooks/pre-commit", content: "#!/bin/sh\n" }], reason: "sensitive_path" },
      {
        name: "the per-file ceiling",
        files: () => [good, { path: "big.bin", content_base64: Buffer.alloc(4 * 1024 * 1024 + 3).toString("base64") }],
        reason: "file_too_large",
        detail: "import_file_ceiling",
      },
      {
        name: "the per-call ceiling",
        files: () => [good, { path: "big1.txt", content: bigText(3_200_000) }, { path: "big2.txt", content: bigText(3_200_000) }],
        reason: "file_too_large",
        detail: "import_call_ceiling",
      },
      {
        name: "a stale revision",
        files: async () => {
          const read = await callTool(dev.client, "read_files", { project: dev.project, files: [{ path: "src/keep.ts" }] });
          const revision = String((read.result["items"] as Array<Record<string, unknown>>)[0]?.["read_revision"]);
          return [
            good,
            { path: "src/keep.ts", content: "changed\n", overwrite: true, expected_read_revision: revision.replace(/.$/, (c) => (c === "0" ? "1" : "0")) },
          ];
        },
        reason: "stale_read_revision",
      },
      { name: "overwrite without a revision", files: () => [good, { path: "src/keep.ts", content: "changed\n", overwrite: true }], reason: "missing_field" },
      { name: "an existing file without overwrite", files: () => [good, { path: "src/keep.ts", content: "changed\n" }], reason: "path_exists" },
      { name: "both content and content_base64", files: () => [good, { path: "both.txt", content: "x", content_base64: "eA==" }], reason: "invalid_value" },
      { name: "the same path twice", files: () => [good, { path: "twice.txt", content: "1" }, { path: "twice.txt", content: "2" }], reason: "invalid_value" },
    ];
    for (const c of cases) {
      it(c.name, async () => {
        const files = await c.files();
        const before = snapshot(dev.projectDir);
        const res = await call(files);
        assert.equal(res.isError, true, JSON.stringify(res.result).slice(0, 300));
        assert.equal(res.result["reason_code"], c.reason, JSON.stringify(res.result).slice(0, 300));
        if (c.detail) assert.equal(res.result["detail_code"], c.detail);
        assert.equal(res.result["state_changed"], false);
        assert.deepEqual(snapshot(dev.projectDir), before);
        if (c.reason === "stale_read_revision") {
          // The recovery is the exact re-read, run as returned.
          const f = res.result["follow_up"] as { tool: string; arguments: Record<string, unknown> };
          const reread = await callTool(dev.client, f.tool, f.arguments);
          assert.equal(reread.isError, false, JSON.stringify(reread.result));
          assert.match(JSON.stringify(reread.result), /src\/keep\.ts/);
        }
      });
    }
  });
});
