/**
 * The gateway's durable audit spool: records the audit service could not take yet, and reads
 * answered before their record is stored, appended with group commit, replayed by the recorder
 * (audit-recorder.ts).
 *
 * Layout (one gateway process per directory, enforced by `spool.lock`, which names the
 * holder's pid; a lock of a dead process is stale):
 *   segment-<seq>.jsonl   one JSON ActionRecord per line, appended with group commit;
 *                         a torn last line (crash mid-write) is skipped on replay.
 * A replay seals the open segment (new appends start the next one), delivers sealed segments
 * in order and deletes each once every record in it is acknowledged.
 *
 * An append costs one write, durable when it returns: segments are opened with O_DSYNC, which
 * makes a write what a write followed by an fdatasync is, in one system call instead of two.
 * The next segment is created (and its directory entry fsync'd) ahead of need, and
 * preallocated with zeros and synced then, so an append overwrites blocks the file already has
 * and flushes the records without a file-system journal commit (a growing file needs one per
 * append: several milliseconds on a busy ext4 disk). A segment is sealed when full (its file
 * then ends with its records) or for a replay (truncated to its records); a segment left by a
 * crash may end in zeros, which a reader ignores.
 */
import { closeSync, constants, fsyncSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
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
  /** Records of this segment the recorder delivered from memory (see `delivered`). */
  delivered?: number;
}

const SEGMENT = /^segment-(\d{12})\.jsonl$/;
/**
 * Bytes a new segment is preallocated with: what the reads of one shipping window (100 ms)
 * append at a thousand calls a second; appends past them still work (the file grows).
 */
const PREALLOCATED_BYTES = 256 * 1024;

/** A segment's records: its text up to the preallocated zeros a crash may have left. */
function recordText(text: string): string {
  const end = text.indexOf("\0");
  return end < 0 ? text : text.slice(0, end);
}
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
  resolve: (seq: number) => void;
  reject: (error: unknown) => void;
}

/** A segment appends go to; `size` is the length of its records (the rest is preallocated zeros). */
type OpenSegment = Segment & { fh: FileHandle; size: number };

/** The on-disk spool of one gateway process (see the file header). */
export class Spool {
  private sealed: Segment[] = [];
  /** The open segment. */
  private current: OpenSegment | undefined;
  /** The next segment, created ahead of need. */
  private spare: Promise<OpenSegment> | undefined;
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
      const text = recordText(await readFile(path, "utf8"));
      const records = text.split("\n").filter((l) => l.trim() !== "").length;
      if (records === 0) await unlink(path);
      else {
        spool.sealed.push({ seq: Number(m[1]), path, records });
        spool.bytes += Buffer.byteLength(text);
      }
      spool.nextSeq = Math.max(spool.nextSeq, Number(m[1]) + 1);
    }
    // The first append finds its segment ready (a failure here is retried by that append).
    spool.prepareSpare();
    return spool;
  }

  get pending(): number {
    const undelivered = (s: Segment) => Math.max(0, s.records - (s.delivered ?? 0));
    return this.sealed.reduce((n, s) => n + undelivered(s), 0) + (this.current ? undelivered(this.current) : 0) + this.queue.reduce((n, p) => n + p.count, 0);
  }

  /**
   * Appends records durably (write + fdatasync, group-committed with concurrent appends);
   * resolves with the seq of the segment they are in.
   */
  append(records: readonly ActionRecordInit[]): Promise<number> {
    const lines = records.map((r) => `${JSON.stringify(toJson(ActionRecordSchema, create(ActionRecordSchema, r)))}\n`).join("");
    const bytes = Buffer.byteLength(lines);
    if (this.bytes + bytes > this.maxBytes) return Promise.reject(new Error(`audit spool full (${this.bytes} bytes)`));
    return new Promise<number>((resolve, reject) => {
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
        const current = await this.openSegment();
        const text = Buffer.from(group.map((p) => p.lines).join(""));
        // Durable when it returns (O_DSYNC): data, and the size when it grew past the preallocation.
        await current.fh.write(text, 0, text.length, current.size);
        current.size += text.length;
        current.records += group.reduce((n, p) => n + p.count, 0);
        this.bytes += group.reduce((n, p) => n + p.bytes, 0);
        for (const p of group) p.resolve(current.seq);
        // Full: the next group goes to the spare (half full: the spare is made ready).
        if (current.size >= PREALLOCATED_BYTES) this.rotate(current);
        else if (current.size >= PREALLOCATED_BYTES / 2) this.prepareSpare();
      } catch (error) {
        for (const p of group) p.reject(error);
      }
    }
  }

  /** A new segment: created, preallocated with zeros and synced, its directory entry synced. */
  private async createSegment(): Promise<OpenSegment> {
    const seq = this.nextSeq++;
    const path = join(this.dir, segmentName(seq));
    const fh = await open(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_DSYNC);
    try {
      await fh.write(Buffer.alloc(PREALLOCATED_BYTES), 0, PREALLOCATED_BYTES, 0);
      await fh.sync();
      await fsyncDir(this.dir);
    } catch (error) {
      await fh.close().catch(() => undefined);
      await unlink(path).catch(() => undefined);
      throw error;
    }
    return { seq, path, records: 0, fh, size: 0 };
  }

  /** Creates the next segment ahead of need, off the answer path, unless one is ready or on its way. */
  private prepareSpare(): void {
    if (this.spare) return;
    const spare = this.createSegment();
    this.spare = spare;
    spare.catch(() => {
      if (this.spare === spare) this.spare = undefined;
    });
  }

  /** The open segment: the spare when there is none (or a segment created now). Only the writer calls it. */
  private async openSegment(): Promise<OpenSegment> {
    if (this.current) return this.current;
    const next = this.spare ?? this.createSegment();
    this.spare = undefined;
    this.current = await next;
    return this.current;
  }

  /** Seals a full open segment without waiting: its file ends with its records. */
  private rotate(c: OpenSegment): void {
    if (this.current !== c) return;
    this.current = undefined;
    this.sealed.push({ seq: c.seq, path: c.path, records: c.records, ...(c.delivered !== undefined ? { delivered: c.delivered } : {}) });
    void c.fh.close().catch(() => undefined);
    this.prepareSpare();
  }

  /**
   * Closes the open segment (truncated to its records) so a replay can deliver it; later appends
   * go to the spare, created now, off the answer path. An empty open segment stays open.
   */
  async seal(): Promise<void> {
    while (this.writing) await this.writing;
    const c = this.current;
    if (!c || c.records === 0) return;
    this.current = undefined;
    await c.fh.truncate(c.size);
    await c.fh.sync();
    await c.fh.close();
    this.sealed.push({ seq: c.seq, path: c.path, records: c.records, ...(c.delivered !== undefined ? { delivered: c.delivered } : {}) });
    this.prepareSpare();
  }

  /**
   * `count` records appended to segment `seq` were delivered to the audit service by other means
   * than a replay (the recorder ships the reads it spooled from memory). A sealed segment (the
   * open one is sealed when its preallocated space is used up) all of whose records are
   * delivered is deleted. A segment not deleted (a crash) is replayed whole; the audit service
   * ignores the records it already has. Not to be called concurrently with a replay.
   */
  async delivered(seq: number, count: number): Promise<void> {
    const segment = this.current?.seq === seq ? this.current : this.sealed.find((s) => s.seq === seq);
    if (!segment) return;
    segment.delivered = (segment.delivered ?? 0) + count;
    if (segment !== this.current && segment.delivered >= segment.records) await this.remove(segment);
  }

  segments(): readonly Segment[] {
    return this.sealed;
  }

  /** The records of a sealed segment, deduplicated by call_id; a torn line is skipped. */
  async read(segment: Segment): Promise<{ records: ActionRecord[]; torn: number }> {
    const byCallId = new Map<string, ActionRecord>();
    let torn = 0;
    for (const line of recordText(await readFile(segment.path, "utf8")).split("\n")) {
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
    // Segments created ahead and still empty are not left behind.
    const empty = [this.current, await this.spare?.catch(() => undefined)];
    this.current = this.spare = undefined;
    for (const c of empty) {
      if (!c || c.records > 0) continue;
      await c.fh.close().catch(() => undefined);
      await unlink(c.path).catch(() => undefined);
    }
    this.unlock();
  }
}
