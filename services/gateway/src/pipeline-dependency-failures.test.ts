/**
 * A dependency that fails a call: the operator's log names the cause, and the caller's
 * follow-up inspects the workspace only after a tool that can change it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import { createLogger } from "@webcodex/platform";
import { followUpTarget } from "@webcodex/contracts";
import type { FollowUp } from "@webcodex/contracts";
import type { ActionRecordInit } from "./audit-recorder.js";
import { testPipeline } from "./pipeline.test-support.js";

const PROJECT = "agent:acme:app";
const CAUSE = 'duplicate key value violates unique constraint "session_refs_pkey"';

function harness() {
  const logs: Array<Record<string, unknown>> = [];
  const audit: ActionRecordInit[] = [];
  const refResolver = createClient(
    RefResolverService,
    createRouterTransport(({ service }) => {
      service(RefResolverService, {
        resolveProject: () => ({
          project: { canonicalId: PROJECT, rootIdentity: "/srv/app", incarnation: 1n, clientId: "acme", projectId: "app", name: "app" },
        }),
        createSession: () => {
          throw new ConnectError(CAUSE, Code.Internal);
        },
      });
    }),
  );
  const broker = createClient(
    RunnerBrokerService,
    createRouterTransport(({ service }) => {
      service(RunnerBrokerService, {
        dispatch: () => {
          throw new ConnectError("runner-broker: connection reset mid-call", Code.Internal);
        },
      });
    }),
  );
  const logger = createLogger({
    service: "test",
    level: "warn",
    write: (line) => {
      logs.push(JSON.parse(line) as Record<string, unknown>);
    },
  });
  const pipeline = testPipeline({ refResolver, broker, logger }, audit);
  const caller = { principal: { clientId: "acme", subject: "alice" }, admissionProfile: "full" as const, scopes: ["webcodex:read", "webcodex:write"] };
  const call = (tool: string, args: Record<string, unknown>) => pipeline.call(caller, tool, args, new AbortController().signal);
  return { logs, call };
}

test("a create_session whose store fails is dependency_unavailable with no workspace inspection, and the log names the cause", async () => {
  const { logs, call } = harness();
  const result = await call("create_session", { project: "~p1" });
  assert.equal(result.isError, true);
  assert.deepEqual(
    [result.structuredContent["reason_code"], result.structuredContent["outcome_unknown"]],
    ["dependency_unavailable", true],
    "a write whose answer was lost: its effect (a Session) is unknown",
  );
  assert.equal(result.structuredContent["follow_up"], undefined, "create_session cannot have changed the workspace: nothing to inspect there");
  assert.equal(JSON.stringify(result.structuredContent).includes("session_refs_pkey"), false, "the cause is the operator's, not the caller's");
  const line = logs.find((l) => l["msg"] === "tool call dependency failed");
  assert.ok(line, JSON.stringify(logs));
  assert.equal(line["tool"], "create_session");
  assert.match(String(line["cause"]), /session_refs_pkey/);
});

test("an edit whose dispatch fails after it left carries the workspace inspection, and the log names the cause", async () => {
  const { logs, call } = harness();
  const result = await call("edit_project_files", { project: "~p1", changes: [{ kind: "create", path: "a.ts", content: "x" }] });
  assert.deepEqual([result.structuredContent["reason_code"], result.structuredContent["outcome_unknown"]], ["dependency_unavailable", true]);
  const followUp = result.structuredContent["follow_up"] as FollowUp | undefined;
  assert.ok(followUp);
  const target = followUpTarget(followUp);
  assert.deepEqual([target.tool, target.arguments["project"]], ["read_workspace_changes", "~p1"]);
  const line = logs.find((l) => l["msg"] === "tool call dependency failed");
  assert.equal(line?.["tool"], "edit_project_files");
  assert.match(String(line?.["cause"]), /connection reset mid-call/);
});
