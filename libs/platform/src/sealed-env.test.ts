import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { isSecretEnvName } from "./sealed-env.js";

const MODULE = fileURLToPath(new URL("./sealed-env.js", import.meta.url));

describe("sealSecretEnvironment", () => {
  it("removes secret values from /proc/self/environ and process.env, keeping them in the returned copy", () => {
    const script = `
      import { readFileSync } from "node:fs";
      const { sealSecretEnvironment } = await import(${JSON.stringify(MODULE)});
      const sealed = sealSecretEnvironment();
      const child = (await import("node:child_process")).execFileSync("sh", ["-c", "cat /proc/$PPID/environ"], { encoding: "utf8" });
      process.stdout.write(JSON.stringify({
        copy: sealed.env.WEBCODEX_DEV_TOKEN, url: sealed.env.WEBCODEX_POSTGRES_URL, sealed: sealed.sealed.sort(), scrubbed: sealed.scrubbed,
        live: process.env.WEBCODEX_DEV_TOKEN ?? null, proc: readFileSync("/proc/self/environ", "utf8"), viaChild: child,
        kept: process.env.WEBCODEX_LOG_LEVEL,
      }));`;
    const out = JSON.parse(
      execFileSync(process.execPath, ["--input-type=module", "-e", script], {
        env: {
          PATH: process.env["PATH"] ?? "/usr/bin:/bin",
          WEBCODEX_DEV_TOKEN: "dev-token-probe-0123456789",
          WEBCODEX_POSTGRES_URL: "postgres://u:pw-probe@h/db",
          WEBCODEX_LOG_LEVEL: "warn",
        },
        encoding: "utf8",
      }),
    ) as Record<string, unknown>;
    assert.equal(out["copy"], "dev-token-probe-0123456789");
    assert.equal(out["url"], "postgres://u:pw-probe@h/db");
    assert.deepEqual(out["sealed"], ["WEBCODEX_DEV_TOKEN", "WEBCODEX_POSTGRES_URL"]);
    assert.equal(out["scrubbed"], true);
    assert.equal(out["live"], null);
    for (const key of ["proc", "viaChild"]) {
      assert.equal(String(out[key]).includes("dev-token-probe"), false, key);
      assert.equal(String(out[key]).includes("pw-probe"), false, key);
    }
    assert.equal(out["kept"], "warn", "settings that are not secret stay");
  });

  it("names what counts as secret", () => {
    for (const name of [
      "WEBCODEX_DEV_TOKEN",
      "WEBCODEX_RUNNER_TOKEN",
      "WEBCODEX_AUDIT_KEY_SECRET",
      "WEBCODEX_POSTGRES_URL",
      "WEBCODEX_REDIS_URL",
      "WEBCODEX_SERVICE_SIGNING_KEY",
    ]) {
      assert.equal(isSecretEnvName(name), true, name);
    }
    for (const name of [
      "WEBCODEX_DEV_TOKENS_FILE",
      "WEBCODEX_RUNNER_TOKEN_FILE",
      "WEBCODEX_REDIS_KEY_PREFIX",
      "WEBCODEX_LOG_LEVEL",
      "WEBCODEX_PUBLIC_URL",
      "PATH",
    ]) {
      assert.equal(isSecretEnvName(name), false, name);
    }
  });
});
