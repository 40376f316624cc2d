/**
 * Runtime probes for the validation capability rows: a row is advertised only when its
 * toolchain answers on the PATH the Runner's child processes get. Probed once per process.
 */
import { spawnSync } from "node:child_process";
import type { RunnerCapabilityId } from "@webcodex/contracts";

const PROBES: ReadonlyArray<{ id: RunnerCapabilityId; argv: [string, ...string[]] }> = [
  { id: "validationNode", argv: [process.execPath, "--version"] },
  { id: "validationPython", argv: ["python3", "--version"] },
  { id: "validationGo", argv: ["go", "version"] },
  { id: "validationRust", argv: ["cargo", "--version"] },
];

const cache = new Map<string, readonly RunnerCapabilityId[]>();

/**
 * The validation capabilities whose toolchain runs with this PATH, as `user` when given (the
 * user Jobs run as: a toolchain in the Runner's home may be out of its reach).
 */
export function probeValidationCapabilities(pathEnv: string, user?: { uid: number; gid: number; home: string }): readonly RunnerCapabilityId[] {
  const key = user === undefined ? pathEnv : `${user.uid}:${user.gid}:${pathEnv}`;
  const hit = cache.get(key);
  if (hit) return hit;
  const found = PROBES.filter((p) => {
    const r = spawnSync(p.argv[0], p.argv.slice(1), {
      env: { PATH: pathEnv, HOME: user?.home ?? process.env["HOME"] ?? "/" },
      stdio: "ignore",
      timeout: 15_000,
      ...(user === undefined ? {} : { uid: user.uid, gid: user.gid }),
    });
    return r.error === undefined && r.status === 0;
  }).map((p) => p.id);
  cache.set(key, found);
  return found;
}
