import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

/**
 * What loading the CLI brings in: importing main.js (and so every module it imports statically,
 * among them all that `webcodex dev` and `webcodex stdio` import up front) does not load a module
 * that only another deployment needs, so that module costs them no memory at start. Checked by
 * importing main.js in a child process whose module resolution refuses the module. A command is
 * not run here: a module a command loads later by a dynamic import is not covered.
 */
const refuse = (...specifiers: string[]) => {
  const hooks = `const refused = ${JSON.stringify(specifiers)}; export async function resolve(s, c, next) { if (refused.some((r) => s === r || s.startsWith(r + "/"))) throw new Error("refused: " + s); return next(s, c); }`;
  const register = `import { register } from "node:module"; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
  return ["--import", `data:text/javascript,${encodeURIComponent(register)}`];
};
const importIn = (flags: string[], module: string) =>
  spawnSync(process.execPath, [...flags, "--input-type=module", "-e", `await import(${JSON.stringify(module)});`], { encoding: "utf8", timeout: 60_000 });

describe("startup imports", () => {
  const cli = new URL("./main.js", import.meta.url).href;

  it("the CLI loads without the Kubernetes client (only a broker provisioning Runner pods needs it)", () => {
    const refused = importIn(refuse("@kubernetes/client-node"), "@kubernetes/client-node");
    assert.notEqual(refused.status, 0, "the refusing resolver is in effect");
    assert.match(refused.stderr, /refused: @kubernetes\/client-node/);
    const loaded = importIn(refuse("@kubernetes/client-node"), cli);
    assert.equal(loaded.status, 0, loaded.stderr);
  });

  // A service's start on a loaded machine is mostly loading code: it loads its own only.
  const executable = fileURLToPath(new URL("../bin/webcodex.js", import.meta.url));
  const start = (flags: string[], args: string[]) =>
    spawnSync(process.execPath, [...flags, executable, ...args], { encoding: "utf8", timeout: 60_000, env: { PATH: process.env["PATH"] ?? "" } });
  const elsewhere = ["@webcodex/gateway", "@webcodex/ref-resolver", "@webcodex/runner-broker", "@webcodex/audit", "@modelcontextprotocol/sdk"];

  it("webcodex runner reaches the Runner without loading another service, the embedded mode or the MCP SDK", () => {
    const started = start(refuse(...elsewhere, "@webcodex/tool-registry"), ["runner"]);
    assert.doesNotMatch(started.stderr, /refused/);
    assert.match(started.stderr, /WEBCODEX_RUNNER_ROOT is required/, "the Runner's own configuration check ran");
  });

  it("webcodex serve <service> reaches that service without loading the others", () => {
    const others = [...elsewhere.filter((m) => m !== "@webcodex/audit"), "@webcodex/runner", "@webcodex/tool-registry"];
    const started = start(refuse(...others), ["serve", "audit"]);
    assert.doesNotMatch(started.stderr, /refused/);
    assert.match(started.stderr, /WEBCODEX_POSTGRES_URL is required/, "the audit service's own configuration check ran");
  });

  it("help and --version answer without loading any service, the database layer or the MCP SDK", () => {
    const refused = refuse(...elsewhere, "@webcodex/platform", "@webcodex/runner", "@webcodex/tool-registry");
    for (const args of [["--help"], ["dev", "--help"], ["serve", "gateway", "-h"], ["--version"]]) {
      const answered = start(refused, args);
      assert.equal(answered.status, 0, `${args.join(" ")}: ${answered.stderr}`);
      assert.equal(answered.stderr, "", args.join(" "));
      assert.match(answered.stdout, /^(usage|webcodex \d)/, args.join(" "));
    }
    // The same resolver does refuse a command that needs those modules.
    assert.match(start(refused, ["serve", "audit"]).stderr, /refused/);
  });
});
