/**
 * The Runner's high-water marks of Agent Attempt fences, one per Task, kept durably in the
 * Runner's state directory (beside the write journal: outside the workspace, so neither
 * model-visible nor part of the project's git status).
 *
 * A mutating call made for an Attempt (attempt_ref) carries the Attempt's (task id, fence).
 * The gateway admitted it a moment earlier, but a takeover may have happened since; the
 * storage is where fencing tokens take effect: `admit` raises the Task's mark to the call's
 * fence, durably (file written, fsync'ed, renamed, directory fsync'ed), before anything is
 * written or run, and refuses a fence below the mark. The check and the raise are one step
 * per Task (calls of one Task are serialized through it), and the mark survives a Runner
 * restart. `raise` lifts a mark the same way when a new Attempt starts, before the Attempt is
 * handed to its caller (the broker relays it to the Project's Runner).
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";

/** Task ids as issued (wc_task_<hex>); anything else is never a file name here. */
const TASK_ID = /^wc_task_[0-9a-f]{32}$/;
const MARK = /^(0|[1-9][0-9]{0,17})\n?$/;

export type AttemptFenceAdmission =
  { admitted: true; highest: number } | { admitted: false; highest: number; why: "fence_below_mark" } | { admitted: false; why: "invalid_task_id" };

export interface AttemptFenceStore {
  readonly dir: string;
  /** Admits `fence` for `taskId` unless a higher one was seen; raises the durable mark first. Throws when the mark cannot be read or written. */
  admit(taskId: string, fence: number): Promise<AttemptFenceAdmission>;
  /**
   * Raises the Task's mark to `fence` (durably) unless it is already at least that; returns the
   * mark now (undefined: not a task id). Throws when the mark cannot be read or written.
   */
  raise(taskId: string, fence: number): Promise<number | undefined>;
  /** The Task's recorded mark (0: none). */
  highest(taskId: string): Promise<number>;
}

export function createAttemptFenceStore(stateDir: string): AttemptFenceStore {
  const dir = path.join(path.resolve(stateDir), "attempt-fences");
  const marks = new Map<string, number>();
  const queues = new Map<string, Promise<unknown>>();
  let ready: Promise<void> | undefined;
  const ensure = () =>
    (ready ??= mkdir(dir, { recursive: true, mode: 0o700 }).then(
      () => undefined,
      (error: unknown) => {
        ready = undefined;
        throw error;
      },
    ));

  async function load(taskId: string): Promise<number> {
    const cached = marks.get(taskId);
    if (cached !== undefined) return cached;
    let text: string;
    try {
      text = await readFile(path.join(dir, taskId), "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      text = "0";
    }
    if (!MARK.test(text)) throw new Error(`attempt fence mark of ${taskId} is unreadable`);
    const mark = Number(text.trim());
    marks.set(taskId, mark);
    return mark;
  }

  async function persist(taskId: string, fence: number): Promise<void> {
    const tmp = path.join(dir, `.${taskId}.${randomBytes(6).toString("hex")}.tmp`);
    try {
      await writeFile(tmp, `${fence}\n`, { flag: "wx", mode: 0o600 });
      await fsync(tmp);
      await rename(tmp, path.join(dir, taskId));
    } catch (error) {
      await rm(tmp, { force: true }).catch(() => undefined);
      throw error;
    }
    await fsync(dir);
    marks.set(taskId, fence);
  }

  /** Runs `fn` after every earlier call for the same Task has finished. */
  function serialized<T>(taskId: string, fn: () => Promise<T>): Promise<T> {
    const prior = queues.get(taskId) ?? Promise.resolve();
    const next = prior.then(fn, fn);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    queues.set(taskId, settled);
    void settled.then(() => {
      if (queues.get(taskId) === settled) queues.delete(taskId);
    });
    return next;
  }

  return {
    dir,
    async admit(taskId, fence) {
      if (!TASK_ID.test(taskId)) return { admitted: false, why: "invalid_task_id" };
      await ensure();
      return serialized(taskId, async () => {
        const mark = await load(taskId);
        if (fence < mark) return { admitted: false, highest: mark, why: "fence_below_mark" as const };
        if (fence > mark) await persist(taskId, fence);
        return { admitted: true, highest: fence };
      });
    },
    async raise(taskId, fence) {
      if (!TASK_ID.test(taskId) || !Number.isSafeInteger(fence) || fence < 1) return undefined;
      await ensure();
      return serialized(taskId, async () => {
        const mark = await load(taskId);
        if (fence <= mark) return mark;
        await persist(taskId, fence);
        return fence;
      });
    },
    async highest(taskId) {
      if (!TASK_ID.test(taskId)) return 0;
      await ensure();
      return serialized(taskId, () => load(taskId));
    },
  };
}

async function fsync(target: string): Promise<void> {
  const handle = await open(target, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
