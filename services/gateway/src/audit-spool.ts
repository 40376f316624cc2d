/**
 * The gateway's durable audit spool: records the audit service could not take yet, appended
 * with group commit + fdatasync, replayed by the recorder (audit-recorder.ts).
 *
 * Layout (one gateway process per directory, enforced by `spool.lock`, which names the
 * holder's pid; a lock of a dead process is stale):
 *   segment-<seq>.jsonl   one JSON ActionRecord per line, appended with group commit + fdatasync;
 *                         a torn last line (crash mid-write) is skipped on replay.
 * A replay seals the open segment (new appends start the next one), delivers sealed segments
 * in order and deletes each once every record in it is acknowledged.
 */
import { closeSync, fsyncSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { mkdir, open, readdir, readFile, realpath, stat, unlink } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { create, fromJson, toJson } from "@bufbuild/protobuf";
import type { JsonValue, MessageInitShape } from "@bufbuild/protobuf";
import { ActionRecordSchema } from "@webcodex/proto";
import type { ActionRecord } from "@webcodex/proto";

type ActionRecordInit = MessageInitShape<typeof ActionRecordSchema>;

export interface Segment {
  seq: number;
  path: string;
  records: number;
}

const SEGMENT = /^segment-(\d{12})\.jsonl$/;
const segmentName = (seq: number) => `segment-${String(seq).padStart(12, "0")}.jsonl`;

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Spool directories locked by this process. */
const lockedHere = new Set<string>();

/**
 * Takes `spool.lock` for this process. A lock left by a dead process, or by our own pid when
 * this process does not hold it (a previous container that also ran as pid 1), is stale.
 */
function lockDir(dir: string): () => void {
  const path = join(dir, "spool.lock");
  if (lockedHere.has(path)) throw new Error(`audit spool ${dir} is in use by this process`);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, "wx");
      writeSync(fd, String(process.pid));
      fsyncSync(fd);
      closeSync(fd);
      lockedHere.add(path);
      return () => {
        lockedHere.delete(path);
        try {
          if (readFileSync(path, "utf8") === String(process.pid)) unlinkSync(path);
        } catch {
          // already gone
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      let holder = Number.NaN;
      try {
        holder = Number(readFileSync(path, "utf8").trim());
      } catch {
        // removed meanwhile
      }
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && pidAlive(holder))
        throw new Error(`audit spool ${dir} is in use by process ${holder}`);
      try {
        unlinkSync(path);
      } catch {
        // raced with another stale-lock cleanup
      }
    }
  }
  throw new Error(`could not lock audit spool ${dir}`);
}

interface Pending {
  lines: string;
  count: number;
  bytes: number;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** The on-disk spool of one gateway process (see the file header). */
export class Spool {
  private sealed: Segment[] = [];
  private current: (Segment & { fh: FileHandle }) | undefined;
  private nextSeq = 1;
  private bytes = 0;
  private queue: Pending[] = [];
  private writing: Promise<void> | undefined;

  private constructor(
    readonly dir: string,
    private readonly maxBytes: number,
    private readonly unlock: () => void,
  ) {}

  static async open(dir: string, maxBytes: number): Promise<Spool> {
    await mkdir(dir, { recursive: true });
    const unlock = lockDir(await realpath(dir));
    const spool = new Spool(dir, maxBytes, unlock);
    for (const name of (await readdir(dir)).sort()) {
      const m = SEGMENT.exec(name);
      if (!m) continue;
      const path = join(dir, name);
      const text = await readFile(path, "utf8");
      const records = text.split("\n").filter((l) => l.trim() !== "").length;
      if (records === 0) await unlink(path);
      else {
        spool.sealed.push({ seq: Number(m[1]), path, records });
        spool.bytes += Buffer.byteLength(text);
      }
      spool.nextSeq = Math.max(spool.nextSeq, Number(m[1]) + 1);
    }
    return spool;
  }

  get pending(): number {
    return this.sealed.reduce((n, s) => n + s.records, 0) + (this.current?.records ?? 0) + this.queue.reduce((n, p) => n + p.count, 0);
  }

  /** Appends records durably (write + fdatasync, group-committed with concurrent appends). */
  append(records: readonly ActionRecordInit[]): Promise<void> {
    const lines = records.map((r) => `${JSON.stringify(toJson(ActionRecordSchema, create(ActionRecordSchema, r)))}\n`).join("");
    const bytes = Buffer.byteLength(lines);
    if (this.bytes + bytes > this.maxBytes) return Promise.reject(new Error(`audit spool full (${this.bytes} bytes)`));
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ lines, count: records.length, bytes, resolve, reject });
      this.kick();
    });
  }

  /** One writer at a time; appends that arrive while it finishes start the next round. */
  private kick(): void {
    if (this.writing) return;
    this.writing = this.drain().finally(() => {
      this.writing = undefined;
      if (this.queue.length > 0) this.kick();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const group = this.queue;
      this.queue = [];
      try {
        if (!this.current) {
          const seq = this.nextSeq++;
          const path = join(this.dir, segmentName(seq));
          const fh = await open(path, "a");
          await fsyncDir(this.dir);
          this.current = { seq, path, records: 0, fh };
        }
        const text = group.map((p) => p.lines).join("");
        await this.current.fh.write(text);
        await this.current.fh.datasync();
        this.current.records += group.reduce((n, p) => n + p.count, 0);
        this.bytes += group.reduce((n, p) => n + p.bytes, 0);
        for (const p of group) p.resolve();
      } catch (error) {
        for (const p of group) p.reject(error);
      }
    }
  }

  /** Closes the open segment so a replay can deliver it; later appends start a new one. */
  async seal(): Promise<void> {
    while (this.writing) await this.writing;
    const c = this.current;
    if (!c) return;
    this.current = undefined;
    await c.fh.close();
    if (c.records > 0) this.sealed.push({ seq: c.seq, path: c.path, records: c.records });
    else await unlink(c.path).catch(() => undefined);
  }

  segments(): readonly Segment[] {
    return this.sealed;
  }

  /** The records of a sealed segment, deduplicated by call_id; a torn line is skipped. */
  async read(segment: Segment): Promise<{ records: ActionRecord[]; torn: number }> {
    const byCallId = new Map<string, ActionRecord>();
    let torn = 0;
    for (const line of (await readFile(segment.path, "utf8")).split("\n")) {
      if (line.trim() === "") continue;
      try {
        const r = fromJson(ActionRecordSchema, JSON.parse(line) as JsonValue);
        if (!byCallId.has(r.callId)) byCallId.set(r.callId, r);
      } catch {
        torn += 1;
      }
    }
    return { records: [...byCallId.values()], torn };
  }

  async remove(segment: Segment): Promise<void> {
    const size = await stat(segment.path).then(
      (s) => s.size,
      () => 0,
    );
    await unlink(segment.path).catch(() => undefined);
    await fsyncDir(this.dir).catch(() => undefined);
    this.bytes = Math.max(0, this.bytes - size);
    this.sealed = this.sealed.filter((s) => s !== segment);
  }

  async close(): Promise<void> {
    await this.seal();
    this.unlock();
  }
}
