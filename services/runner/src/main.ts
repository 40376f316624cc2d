import { readFileSync } from "node:fs";
import { createClient } from "@connectrpc/connect";
import { RunnerBrokerService } from "@webcodex/proto";
import { createLogger, createMetrics, createServiceTransport, defaultBindHost, onShutdown, startServiceServer, startTelemetry } from "@webcodex/platform";
import type { Env, LogLevel } from "@webcodex/platform";
import { loadConfig } from "./config.js";
import { createRunner, RUNNER_BUILD, runnerSettingsOptions } from "./runner.js";
import { startRegistration } from "./registration.js";
import { cloneOwnerOf, readableBy } from "./exec/job-user.js";
import { seedWorkspaceRoot, writeTerminationMessage } from "./workspace/clone.js";
import { seedFailureLine } from "./workspace/seed-failure.js";

/**
 * Runner entry point: config → workspace → server → registration with the broker → shutdown.
 * One fence guard is shared by the RunnerService and the registration loop, so fences the
 * broker reports on heartbeats raise the floor that mutating calls are checked against.
 */
export async function main(env: Env = process.env): Promise<void> {
  const config = loadConfig(env);
  const logger = createLogger({ service: "runner", level: config.logLevel as LogLevel });
  const telemetry = await startTelemetry("webcodex-runner", env, logger);
  const metrics = createMetrics();
  const credential = config.runnerTokenFile !== undefined ? readFileSync(config.runnerTokenFile, "utf8").trim() : config.runnerToken;
  const token = credential ? { runnerToken: credential } : {};
  if (config.cloneUrl) {
    const cloneCredential =
      config.cloneUsername && config.clonePassword
        ? {
            // Sent only to URLs under its prefix; a credential without one is never sent (clone.ts credentialApplies).
            credential: {
              username: config.cloneUsername,
              password: config.clonePassword,
              ...(config.cloneUrlPrefix ? { urlPrefix: config.cloneUrlPrefix } : {}),
            },
          }
        : {};
    // A workspace the platform made owned by its project's uid is cloned as that uid.
    const owner = cloneOwnerOf(config.root);
    const failure = await seedWorkspaceRoot(config.root, {
      url: config.cloneUrl,
      ...(config.cloneRef ? { ref: config.cloneRef } : {}),
      ...cloneCredential,
      ...(owner ? { owner } : {}),
    });
    if (failure) {
      logger.error("workspace clone failed", { reason_code: failure.reason_code, detail_code: failure.detail_code });
      writeTerminationMessage(failure);
      // A local broker reads why from the exited process's stderr (the termination message's twin).
      process.stderr.write(seedFailureLine(failure));
      await telemetry.shutdown();
      process.exit(3);
    }
  }
  const runner = createRunner({
    root: config.root,
    logger,
    ...token,
    ...(config.runnerId ? { runnerId: config.runnerId } : {}),
    ...runnerSettingsOptions(config),
    ...(config.stateDir ? { stateDir: config.stateDir } : {}),
  });
  if (config.runnerTokenFile !== undefined && runner.jobUser !== undefined && readableBy(config.runnerTokenFile, runner.jobUser)) {
    logger.warn("the Runner credential file is readable by the Job user; make it readable by the Runner's user only (mode 0400 or 0600)", {
      file: config.runnerTokenFile,
    });
  }
  const server = await startServiceServer({
    grpcReflection: config.grpcReflection,
    name: "runner",
    port: config.port,
    host: config.host ?? defaultBindHost(env),
    ...runner.serving,
    metrics,
    logger,
  });
  const registration = startRegistration({
    broker: createClient(RunnerBrokerService, createServiceTransport(config.brokerUrl, { metrics })),
    runnerId: runner.runnerId,
    clientId: config.clientId,
    projectId: config.projectId,
    rootIdentity: await runner.rootIdentity(),
    build: RUNNER_BUILD,
    capabilities: runner.capabilities,
    endpointUrl: config.advertiseUrl ?? server.url,
    containment: runner.containment,
    fence: runner.fence,
    recovered: runner.recovery,
    ...token,
    logger,
  });
  logger.info("listening", { url: server.url, root: config.root });
  onShutdown(logger, async () => {
    registration.stop();
    await server.close();
    await runner.close();
    await telemetry.shutdown();
  });
}
