/**
 * Runtime probes for the validation capability rows: a row is advertised only when its
 * toolchain answers on the PATH the Runner's child processes get. Probed once per process, all
 * toolchains at once and without blocking: the Runner starts listening meanwhile.
 */
import { spawn } from "node:child_process";
import type { RunnerCapabilityId } from "@webcodex/contracts";

const PROBES: ReadonlyArray<{ id: RunnerCapabilityId; argv: [string, ...string[]] }> = [
  { id: "validationNode", argv: [process.execPath, "--version"] },
  { id: "validationPython", argv: ["python3", "--version"] },
  { id: "validationGo", argv: ["go", "version"] },
  { id: "validationRust", argv: ["cargo", "--version"] },
];

/** A toolchain that has not answered by then counts as absent. */
const PROBE_TIMEOUT_MS = 15_000;

type ProbeUser = { uid: number; gid: number; home: string };

const cache = new Map<string, Promise<readonly RunnerCapabilityId[]>>();

/** Whether `argv` runs and exits 0 within the probe timeout. */
function answers(argv: readonly [string, ...string[]], pathEnv: string, user: ProbeUser | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    try {
      const child = spawn(argv[0], argv.slice(1), {
        env: { PATH: pathEnv, HOME: user?.home ?? process.env["HOME"] ?? "/" },
        stdio: "ignore",
        timeout: PROBE_TIMEOUT_MS,
        killSignal: "SIGKILL",
        ...(user === undefined ? {} : { uid: user.uid, gid: user.gid }),
      });
      child.once("error", () => resolve(false));
      child.once("exit", (code) => resolve(code === 0));
    } catch {
      resolve(false);
    }
  });
}

/**
 * The validation capabilities whose toolchain runs with this PATH, as `user` when given (the
 * user Jobs run as: a toolchain in the Runner's home may be out of its reach), in probe order.
 * Never rejects.
 */
export function probeValidationCapabilities(pathEnv: string, user?: ProbeUser): Promise<readonly RunnerCapabilityId[]> {
  const key = user === undefined ? pathEnv : `${user.uid}:${user.gid}:${pathEnv}`;
  let found = cache.get(key);
  if (found === undefined) {
    found = Promise.all(PROBES.map((p) => answers(p.argv, pathEnv, user))).then((ok) => PROBES.filter((_, i) => ok[i]).map((p) => p.id));
    cache.set(key, found);
  }
  return found;
}
