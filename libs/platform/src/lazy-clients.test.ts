import { it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const index = fileURLToPath(new URL("./index.js", import.meta.url));

it("importing the platform loads neither pg nor ioredis: a service without a database or Redis (the Runner) starts without them", () => {
  const script = `
    const platform = await import(${JSON.stringify(index)});
    const { createRequire } = await import("node:module");
    const cache = createRequire(import.meta.url).cache;
    const loaded = () => Object.keys(cache).filter((k) => /node_modules\\/(pg|ioredis)\\//.test(k)).length;
    const atImport = loaded();
    platform.createPostgresDatabase({ url: "postgres://127.0.0.1:1/x" }).close();
    platform.createRedis("redis://127.0.0.1:1", {}).disconnect();
    console.log(JSON.stringify({ atImport, afterUse: loaded() }));`;
  const out = JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" })) as { atImport: number; afterUse: number };
  assert.equal(out.atImport, 0);
  assert.ok(out.afterUse > 0, "the clients load them on first use");
});
