import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { runnerCapabilityCatalog, sampleToolArgs, toolDefinitions } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import { createInProcessClient, createLogger } from "@webcodex/platform";
import { RunnerService } from "@webcodex/proto";
import { createRunner } from "./runner.js";
import type { Runner } from "./runner.js";
import { probeValidationCapabilities } from "./validation/probe.js";
import { scrubbedBaseEnv } from "./exec/child-env.js";

/** Arguments that select each conditional prerequisite a tool declares. */
const VARIANTS: Record<string, Array<Record<string, unknown>>> = {
  run_shell: [{ login: true }],
  edit_project_files: [
    {
      changes: [
        { kind: "edit", path: "a.txt", expected_read_revision: "r_0", edits: [{ replace_exact: { old_text: "a", new_text: "b" }, expected_match_count: 2 }] },
      ],
    },
  ],
};

describe("advertised capabilities", () => {
  let root = "";
  let runner: Runner;
  before(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), "wc-caps-"));
    runner = createRunner({ root, logger: createLogger({ service: "test", level: "silent" }), spawnHost: false });
  });
  after(async () => {
    await runner.close();
    await rm(root, { recursive: true, force: true });
  });

  const runnerTools = () => toolDefinitions().filter((d) => d.execution === "runner");
  const requiredBy = (tool: string): Set<RunnerCapabilityId> => {
    const def = toolDefinitions().find((d) => d.name === tool);
    const base = sampleToolArgs(tool);
    const needed = new Set<RunnerCapabilityId>();
    for (const args of [base, ...(VARIANTS[tool] ?? []).map((v) => ({ ...base, ...v }))])
      for (const id of def?.requiredCapabilities?.(args) ?? []) needed.add(id);
    return needed;
  };

  it("the Runner implements every implemented runner tool of the catalog", () => {
    for (const def of runnerTools().filter((d) => d.implemented)) assert.ok(runner.handlers.tools[def.name], def.name);
  });

  it("equal exactly what its tools need, plus the lease and Attempt fencing its service enforces and the validation toolchains its probe found", async () => {
    // project_validate picks providers from the project's files on the Runner, so each probed
    // toolchain row is advertised for it even when no call's arguments name it.
    const needed = new Set<RunnerCapabilityId>(["fencedExecution", "attemptFencing", ...(await probeValidationCapabilities(scrubbedBaseEnv().PATH as string))]);
    // Every tool the Runner has a handler for, including the gateway-composed skill tools whose project part it reads.
    for (const def of toolDefinitions()) {
      if (runner.handlers.tools[def.name] === undefined) continue;
      for (const id of requiredBy(def.name)) needed.add(id);
    }
    const inCatalogOrder = runnerCapabilityCatalog.filter((r) => needed.has(r.id)).map((r) => r.id);
    assert.deepEqual([...(await runner.capabilities)], inCatalogOrder);
  });

  it("leave out what no handler implements, and include host file import, which one does", async () => {
    const advertised = await runner.capabilities;
    for (const def of runnerTools().filter((d) => runner.handlers.tools[d.name] === undefined)) {
      for (const id of requiredBy(def.name)) assert.ok(!advertised.includes(id), `${def.name} needs ${id}, which is not implemented`);
    }
    assert.ok(advertised.includes("hostFileImport"));
  });

  it("advertise fenced execution because the service refuses a stale fence", async () => {
    assert.ok((await runner.capabilities).includes("fencedExecution"));
    const client = createInProcessClient(RunnerService, runner.service);
    const create = (name: string, fence: bigint) =>
      client.execute({
        callId: name,
        tool: "edit_project_files",
        fence,
        argumentsJson: JSON.stringify({ changes: [{ kind: "create", path: name, content: "x\n" }] }),
      });
    assert.equal((await create("a.txt", 5n)).failure, undefined);
    assert.equal((await create("b.txt", 4n)).failure?.reasonCode, "fence_rejected");
  });
});
