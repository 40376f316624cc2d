/** Pieces the pipeline's unit tests share (a *.test-support file: pruned from the images). */
import { admittedTools, listedTools, toolsListResult } from "@webcodex/contracts";
import type { ActionRecordInit, AuditRecorder } from "./audit-recorder.js";
import type { AdmittedCatalog } from "./catalog-cache.js";
import { createLogger } from "@webcodex/platform";
import { createPipeline } from "./pipeline.js";
import type { PipelineDeps } from "./pipeline.js";

/** The whole catalog, admitted for the full admission profile and the generic Host. */
export function fullCatalog(): AdmittedCatalog {
  const admitted = admittedTools({ admissionProfile: "full", hostProfile: "generic" });
  return { version: "test", admitted: new Map(admitted.map((d) => [d.name, d])), listed: listedTools(admitted), toolsListResult: toolsListResult(admitted) };
}

/** An audit recorder that keeps every record in `records` and is always durable. */
export function memoryAudit(records: ActionRecordInit[]): AuditRecorder {
  return {
    record: (r) => {
      records.push(r);
      return Promise.resolve();
    },
    flush: () => Promise.resolve(),
    replay: () => Promise.resolve(0),
    backlog: () => 0,
    close: () => Promise.resolve(),
  };
}

/**
 * A pipeline over the full catalog for the generic Host, with an in-memory audit recorder
 * filling `audit` and a silent logger unless one is given; `deps` adds or overrides the rest.
 */
export function testPipeline(
  deps: Pick<PipelineDeps, "refResolver" | "broker"> & Partial<PipelineDeps>,
  audit: ActionRecordInit[],
): ReturnType<typeof createPipeline> {
  const catalog = fullCatalog();
  return createPipeline({
    catalogs: { get: () => Promise.resolve(catalog) },
    audit: memoryAudit(audit),
    hostProfile: "generic",
    serverInfo: { name: "t", version: "0", mode: "embedded" },
    logger: createLogger({ service: "test", level: "silent" }),
    ...deps,
  });
}
