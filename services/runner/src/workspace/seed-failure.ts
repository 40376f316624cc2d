/**
 * How a local Runner whose workspace could not be seeded (a clone refused or failed) tells its
 * broker why: one line on its stderr, the local twin of the termination message a Runner pod
 * leaves for Kubernetes. The broker reads it from the exited process's stderr tail, so the
 * caller of create_project gets the clone's own detail code (`clone_target_not_allowed`,
 * `authentication_failed`, ...) rather than a bare "the Runner exited". Only the Runner writes
 * its stderr, and it writes this line before any Job of the project can run.
 */
import { PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";

const PREFIX = "webcodex-runner-seed-failed ";

/** The stderr line for `failure` (newline included). */
export function seedFailureLine(failure: ToolFailure): string {
  return `${PREFIX}${JSON.stringify({ reason_code: failure.reason_code, detail_code: failure.detail_code, message: failure.message })}\n`;
}

/** The seed failure the last such line of a Runner's stderr reports, if any (clone refusals and failures only). */
export function seedFailureFromStderr(lines: readonly string[]): ToolFailure | undefined {
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!;
    const at = line.indexOf(PREFIX);
    if (at < 0) continue;
    try {
      const f = JSON.parse(line.slice(at + PREFIX.length)) as { reason_code?: unknown; detail_code?: unknown; message?: unknown };
      if (f.reason_code !== ReasonCode.cloneFailed && f.reason_code !== ReasonCode.invalidValue) return undefined;
      return toolFailure(f.reason_code, PipelineStage.execution, {
        ...(typeof f.detail_code === "string" ? { detail_code: f.detail_code } : {}),
        ...(typeof f.message === "string" ? { message: f.message } : {}),
      });
    } catch {
      return undefined;
    }
  }
  return undefined;
}
