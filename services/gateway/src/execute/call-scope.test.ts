import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import type { RefResolverService } from "@webcodex/proto";
import type { CallContext } from "../call-context.js";
import { resolveCallProject } from "./call-scope.js";

type Resolver = Client<typeof RefResolverService>;
const resolver = (answer: () => Promise<unknown>) => ({ resolveProject: answer }) as unknown as Resolver;
const context = () =>
  ({
    caller: { principal: { clientId: "acme", subject: "alice" } },
    signal: new AbortController().signal,
    stages: {},
    projectCanonicalId: "",
    sessionId: "",
  }) as unknown as CallContext;

test("a resolved Project becomes the call's scope and is recorded on the call, timed as resolution", async () => {
  const ctx = context();
  const scope = await resolveCallProject(
    resolver(async () => ({ project: { canonicalId: "agent:acme:app", rootIdentity: "/srv/app" } })),
    "~p1",
    ctx,
  );
  assert.deepEqual(scope, { ok: true, project: { canonicalId: "agent:acme:app", rootIdentity: "/srv/app" } });
  assert.equal(ctx.projectCanonicalId, "agent:acme:app");
  assert.ok("resolution" in ctx.stages);
});

test("a refusal is the resolver's own failure, an empty answer is project_not_found, and nothing is recorded on the call", async () => {
  const ctx = context();
  const refused = await resolveCallProject(
    resolver(async () => ({ failure: { reasonCode: "project_not_found", failureStage: "resolution", detailCode: "", message: "", evidenceJson: "" } })),
    "~p9",
    ctx,
  );
  assert.equal(refused.ok, false);
  assert.equal(!refused.ok && refused.failure.reason_code, "project_not_found");
  const empty = await resolveCallProject(
    resolver(async () => ({})),
    "~p9",
    ctx,
  );
  assert.equal(!empty.ok && empty.failure.reason_code, "project_not_found");
  assert.equal(ctx.projectCanonicalId, "");
});

test("an unreachable resolver is dependency_unavailable at resolution, with nothing run", async () => {
  const scope = await resolveCallProject(
    resolver(async () => {
      throw new ConnectError("connect ECONNREFUSED", Code.Unavailable);
    }),
    "~p1",
    context(),
  );
  assert.equal(scope.ok, false);
  if (scope.ok) return;
  assert.deepEqual(
    [scope.failure.reason_code, scope.failure.failure_stage, scope.failure.outcome_unknown, scope.failure.state_changed],
    ["dependency_unavailable", "resolution", false, false],
  );
});
