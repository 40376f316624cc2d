/**
 * A warm Runner pod (Kubernetes warm pool): started with WEBCODEX_RUNNER_WARM=1 and a warm token
 * file (its own Secret), it has loaded the Runner's modules and mounted its workspace volume, but
 * serves no Project. It answers the pod's probes and one RPC, RunnerWarmService.Claim, which the
 * broker calls with the pod's warm token to hand it a Project (tenant, project, credential,
 * broker address); the first valid claim wins, every other is refused, and the Runner starts
 * serving the Project on the same port. The claim's settings (never the credential) are kept in
 * the pod's /tmp volume, so a restarted container serves the same Project with the credential
 * its Secret now holds, instead of waiting for a claim that will never come.
 */
import { timingSafeEqual } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { createLogger, startServiceServer } from "@webcodex/platform";
import { RunnerWarmService } from "@webcodex/proto";
import type { ClaimRequest } from "@webcodex/proto";

/** The WEBCODEX_RUNNER_* settings a claim sets (the credential apart). */
export function claimSettings(c: Pick<ClaimRequest, "clientId" | "projectId" | "brokerUrl" | "cloneUrl" | "cloneRef">): Record<string, string> {
  return {
    WEBCODEX_RUNNER_CLIENT_ID: c.clientId,
    WEBCODEX_RUNNER_PROJECT_ID: c.projectId,
    ...(c.brokerUrl ? { WEBCODEX_RUNNER_BROKER_URL: c.brokerUrl } : {}),
    ...(c.cloneUrl ? { WEBCODEX_RUNNER_CLONE_URL: c.cloneUrl } : {}),
    ...(c.cloneRef ? { WEBCODEX_RUNNER_CLONE_REF: c.cloneRef } : {}),
  };
}

const sameToken = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/**
 * Serves the claim until one is accepted, then resolves with the settings to start with (the
 * credential as WEBCODEX_RUNNER_TOKEN) once the port is free again. A pod claimed before (its
 * claim record is in /tmp) resolves at once, with the credential file its Secret mounts.
 */
export async function awaitWarmClaim(env: NodeJS.ProcessEnv = process.env): Promise<Record<string, string>> {
  const tokenFile = env["WEBCODEX_RUNNER_WARM_TOKEN_FILE"] ?? "";
  const credentialFile = env["WEBCODEX_RUNNER_WARM_CREDENTIAL_FILE"];
  const recordFile = env["WEBCODEX_RUNNER_WARM_CLAIM_FILE"] ?? join(env["WEBCODEX_RUNNER_STATE_DIR"] ?? tmpdir(), "warm-claim.json");
  if (existsSync(recordFile)) {
    const settings = JSON.parse(readFileSync(recordFile, "utf8")) as Record<string, string>;
    return { ...settings, ...(credentialFile ? { WEBCODEX_RUNNER_TOKEN_FILE: credentialFile } : {}) };
  }
  const token = readFileSync(tokenFile, "utf8").trim();
  if (!token) throw new Error(`warm Runner: ${tokenFile} holds no token`);
  let claimed = false;
  let accept!: (settings: Record<string, string>) => void;
  const accepted = new Promise<Record<string, string>>((resolve) => (accept = resolve));
  const server = await startServiceServer({
    name: "runner-warm",
    port: Number(env["WEBCODEX_PORT"] ?? 8085),
    ...(env["WEBCODEX_HOST"] ? { host: env["WEBCODEX_HOST"] } : {}),
    logger: createLogger({ service: "runner-warm", level: "warn" }),
    readinessScope: "process",
    drainMs: 1_000,
    routes: (router) =>
      router.service(RunnerWarmService, {
        claim(req) {
          if (claimed) throw new ConnectError("this Runner is claimed already", Code.FailedPrecondition);
          if (!sameToken(req.warmToken, token)) throw new ConnectError("the warm token is not this Runner's", Code.Unauthenticated);
          if (!req.clientId || !req.projectId) throw new ConnectError("client_id and project_id are required", Code.InvalidArgument);
          claimed = true;
          const settings = claimSettings(req);
          writeFileSync(recordFile, JSON.stringify(settings), { mode: 0o600 });
          setImmediate(() => accept({ ...settings, ...(req.credential ? { WEBCODEX_RUNNER_TOKEN: req.credential } : {}) }));
          return { runner: env["HOSTNAME"] ?? "" };
        },
      }),
  });
  process.stdout.write(`webcodex-runner-warm ${JSON.stringify({ port: server.port })}\n`);
  const settings = await accepted;
  // The answer is on its way (accept runs after it); close() lets it finish, then the port is the Runner's.
  await server.close();
  return settings;
}
