/** Pieces the pipeline's unit tests share (a *.test-support file: pruned from the images). */
import { admittedTools, listedTools, toolsListResult } from "@webcodex/contracts";
import type { ActionRecordInit, AuditRecorder } from "./audit-recorder.js";
import type { AdmittedCatalog } from "./catalog-cache.js";

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
