import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import { createInProcessClient, createLogger } from "@webcodex/platform";
import { RunnerService } from "@webcodex/proto";
import { createRunnerService } from "./runner-service.js";

/** A RunnerService whose validation row is decided by a probe the test answers. */
function serviceWithPendingProbe() {
  let answer: (ids: readonly RunnerCapabilityId[]) => void = () => undefined;
  const probed = new Promise<readonly RunnerCapabilityId[]>((resolve) => (answer = resolve));
  const ran: string[] = [];
  const service = createRunnerService({
    runnerId: "r",
    build: "test",
    rootIdentity: async () => "root-1",
    logger: createLogger({ service: "test", level: "silent" }),
    handlers: {
      capabilities: ["readFiles"],
      probed,
      tools: {
        read_files: async () => (ran.push("read_files"), { items: [] }),
        cargo_check: async () => (ran.push("cargo_check"), { status: "passed" }),
      },
    },
  });
  return { client: createInProcessClient(RunnerService, service), answer, ran };
}

const settledWithin = async <T>(p: Promise<T>, ms: number) =>
  Promise.race([p.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]);

describe("a RunnerService whose toolchain probes have not answered yet", () => {
  it("answers a call that needs only what it advertises from the start", async () => {
    const { client, ran } = serviceWithPendingProbe();
    const res = await client.execute({ callId: "c1", tool: "read_files", argumentsJson: JSON.stringify({ files: [{ path: "a" }] }) });
    assert.equal(res.failure, undefined);
    assert.deepEqual(ran, ["read_files"]);
  });

  it("holds a call needing a probed capability until the probes answer, then runs it", async () => {
    const { client, answer, ran } = serviceWithPendingProbe();
    const call = client.execute({ callId: "c2", tool: "cargo_check", argumentsJson: "{}" });
    assert.equal(await settledWithin(call, 200), false, "not refused while the probes run");
    answer(["validationRust"]);
    const res = await call;
    assert.equal(res.failure, undefined);
    assert.deepEqual(ran, ["cargo_check"]);
    const described = await client.describe({});
    assert.ok(described.capabilities.includes("validation_rust_v1"));
  });

  it("refuses it once the probes answered without that toolchain", async () => {
    const { client, answer, ran } = serviceWithPendingProbe();
    const call = client.execute({ callId: "c3", tool: "cargo_check", argumentsJson: "{}" });
    answer(["validationNode"]);
    const res = await call;
    assert.equal(res.failure?.reasonCode, "capability_missing");
    assert.deepEqual(ran, []);
  });
});

describe("a tool handler that fails unexpectedly", () => {
  function serviceThatThrows() {
    const service = createRunnerService({
      runnerId: "r",
      build: "test",
      rootIdentity: async () => "root-1",
      logger: createLogger({ service: "test", level: "silent" }),
      handlers: {
        capabilities: ["readFiles", "applyTextEdit", "applyTextEditExpectedMatchCount"],
        tools: {
          read_files: async () => {
            throw Object.assign(new Error("ENOENT: raced a rename"), { code: "ENOENT" });
          },
          edit_project_files: async () => {
            throw new Error("disk went away");
          },
        },
      },
    });
    return createInProcessClient(RunnerService, service);
  }

  it("answers a read with a plain failure: a read's outcome is never unknown", async () => {
    const res = await serviceThatThrows().execute({ callId: "r1", tool: "read_files", argumentsJson: JSON.stringify({ files: [{ path: "a" }] }) });
    assert.equal(res.failure?.detailCode, "runner_internal_error");
    assert.equal(res.failure?.outcomeUnknown, false);
  });

  it("answers a write with outcome_unknown: it may have changed something", async () => {
    const res = await serviceThatThrows().execute({ callId: "w1", tool: "edit_project_files", argumentsJson: JSON.stringify({ changes: [] }) });
    assert.equal(res.failure?.detailCode, "runner_internal_error");
    assert.equal(res.failure?.outcomeUnknown, true);
  });
});
