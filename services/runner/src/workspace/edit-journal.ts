/**
 * Intent journal for write transactions (edit_project_files, import_host_files).
 *
 * Before the first byte of a transaction reaches the workspace, the journal makes a durable
 * record (every file fsync'ed, then the directories) of what the transaction touches: each
 * file's before-image (a hard link to the original where the filesystem allows, a copy
 * otherwise, the link text for a symbolic link, or "absent") and its planned after-state
 * (bytes and mode, or "absent"), plus the directories it will create. A `committed` marker is
 * written, fsync'ed, once every change is on disk; the record is removed when the transaction
 * is done and, where the journal is told how (`afterAnswer`), once the call's answer has left:
 * a Runner killed before its caller has the answer leaves the record to recovery, which reports
 * the call's outcome. An answer lost on its connection is recorded as that outcome at once.
 *
 * The journal lives in a state directory next to the workspace, never inside it, so it is
 * neither model-visible nor part of the project's git status.
 *
 * On Runner start, `recover()` finishes every transaction a crash left behind: one past its
 * commit point is completed (after-images installed), any other is rolled back (before-images
 * restored, created directories removed), and stray temp files of the transaction are
 * removed. Each result is kept as an outcome record that can be listed afterwards.
 *
 * One concept over 400 lines: the intent journal (its records, writes and recovery).
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { copyFile, link, lstat, mkdir, open, readdir, readFile, readlink, rename, rm, rmdir, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { errnoCode } from "./path-policy.js";
import { inheritOwner } from "./atomic-fs.js";
import type { JournaledToolName } from "@webcodex/contracts";
export type JournalTool = JournaledToolName;

/** The state of one path before the transaction, as the caller describes it. */
export type BeforeSpec = { absent: true } | { capture: string };
/** The planned state of one path after the transaction. */
export type AfterSpec = { absent: true } | { bytes: Uint8Array; mode?: number } | { sameAsBeforeOf: string };

export interface JournalFileSpec {
  /** Project-relative path (for reports). */
  rel: string;
  /** Absolute path the transaction writes. */
  target: string;
  before: BeforeSpec;
  after: AfterSpec;
}

type StoredBefore = { kind: "absent" } | { kind: "file"; blob: string; mode: number } | { kind: "symlink"; link: string };
type StoredAfter = { kind: "absent" } | { kind: "file"; blob: string; mode?: number } | { kind: "symlink"; link: string };

interface StoredEntry {
  rel: string;
  target: string;
  before: StoredBefore;
  after: StoredAfter;
}

interface IntentRecord {
  version: 1;
  id: string;
  tool: JournalTool;
  /** The call that ran the transaction (the gateway's call id), when known. */
  call_id?: string;
  started_at: string;
  entries: StoredEntry[];
  /** Directories the transaction may create, outermost first. */
  created_dirs: string[];
  /** HMAC-SHA256 of the record without this field, with the journal's key. */
  mac?: string;
}

export type RecoveredOutcome = "rolled_back" | "completed";

/** What recovery did with one interrupted transaction. */
export interface RecoveredTransaction {
  transaction_id: string;
  /** The call that ran the transaction: what the caller's outcome_unknown failure names. */
  call_id?: string;
  tool: JournalTool;
  outcome: RecoveredOutcome;
  paths: string[];
  started_at: string;
  recovered_at: string;
}

/** One transaction's journal record; the three calls mark its steps. */
export interface JournalTransaction {
  readonly id: string;
  /** The commit point: every change is on disk; from now on recovery completes, never rolls back. */
  commit(): Promise<void>;
  /**
   * The transaction finished (applied, or rolled back in process): forget the record, after the
   * call's answer has left when the journal has `afterAnswer` (resolves at once then).
   */
  done(): Promise<void>;
  /** Restores every before-image from the journal (used when an in-process rollback failed). */
  rollback(): Promise<void>;
}

export interface EditJournal {
  readonly dir: string;
  /** Durably records the intent; nothing may be written to the workspace before this resolves. */
  begin(tool: JournalTool, files: readonly JournalFileSpec[], callId?: string): Promise<JournalTransaction>;
  /** Finishes every transaction left unfinished by an earlier process. Run once, before serving. */
  recover(): Promise<RecoveredTransaction[]>;
  /** Outcomes recovery recorded (newest last). */
  recovered(): Promise<RecoveredTransaction[]>;
  /** Resolves once the records of answered calls are forgotten (a Runner shutting down waits for it). */
  settled(): Promise<void>;
}

export interface EditJournalOptions {
  /** State directory outside the workspace; created if missing (`0700`). */
  dir: string;
  /**
   * The workspace root: recovery installs nothing outside it. A record naming a target
   * elsewhere, or not authenticated with this journal's key (`journal.key`, `0600`, made by the
   * Runner), was not written by this Runner and is discarded unread.
   */
  workspaceRoot?: string;
  /** Test seam: called after each durable step of `begin` and before each recovery step. */
  onStep?: (step: string) => void | Promise<void>;
  /**
   * Schedules work for after the current call's answer is sent or lost; false outside a call.
   * Given, a finished transaction's record is kept until then (see above).
   */
  afterAnswer?: (then: (fate: "sent" | "lost") => void) => boolean;
}

const COMMITTED = "committed";
const KEY_FILE = "journal.key";

/** The journal's record key: made once (`0600`), read on later starts. */
async function journalKey(root: string): Promise<Buffer> {
  const file = path.join(root, KEY_FILE);
  try {
    await writeFile(file, randomBytes(32), { flag: "wx", mode: 0o600 });
  } catch (error) {
    if (errnoCode(error) !== "EEXIST") throw error;
  }
  const key = await readFile(file);
  if (key.length !== 32) throw new Error(`${file} is not a journal key`);
  return key;
}
const INTENT = "intent.json";
const PARTIAL = ".partial";
const DISCARDED = ".done";
const TEMP_NAME = /^\.wc-(?:tmp|new|del)-[0-9a-f]{12}$/;

export function createEditJournal(options: EditJournalOptions): EditJournal {
  const root = path.resolve(options.dir);
  const txDir = path.join(root, "transactions");
  const outcomeDir = path.join(root, "recovered");
  const step = async (name: string) => options.onStep?.(name);
  let ready: Promise<void> | undefined;
  // Finished transactions whose record waits for their call's answer: by id, the files they wrote.
  const awaitingAnswer = new Map<string, { targets: ReadonlySet<string>; forget: () => Promise<void> }>();
  const forgetting = new Set<Promise<void>>();
  let key: Buffer | undefined;
  const ensure = () =>
    (ready ??= (async () => {
      await mkdir(root, { recursive: true, mode: 0o700 });
      await mkdir(txDir, { recursive: true, mode: 0o700 });
      await mkdir(outcomeDir, { recursive: true, mode: 0o700 });
      key = await journalKey(root);
      await fsyncPath(root);
    })());
  const mac = (record: IntentRecord) =>
    createHmac("sha256", key!)
      .update(JSON.stringify({ ...record, mac: undefined }))
      .digest("hex");
  /** True when recovery may act on `record`: this journal wrote it, and every target is beneath the workspace root. */
  const trusted = (record: IntentRecord): boolean => {
    const given = Buffer.from(typeof record.mac === "string" ? record.mac : "", "hex");
    const expected = Buffer.from(mac(record), "hex");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false;
    if (options.workspaceRoot === undefined) return true;
    const base = path.resolve(options.workspaceRoot);
    const beneath = (p: string) => {
      const rel = path.relative(base, path.resolve(p));
      return rel !== "" && !rel.startsWith("..") && !path.isAbsolute(rel);
    };
    return record.entries.every((e) => beneath(e.target)) && record.created_dirs.every(beneath);
  };

  async function begin(tool: JournalTool, files: readonly JournalFileSpec[], callId?: string): Promise<JournalTransaction> {
    await ensure();
    // A finished transaction still waiting for its answer is forgotten before a later one writes
    // the same files: recovery must never put back its images over the later change.
    const targets = new Set(files.map((f) => f.target));
    const superseded = [...awaitingAnswer.values()].filter((w) => [...w.targets].some((t) => targets.has(t)));
    await Promise.all(superseded.map((w) => w.forget()));
    const id = `${Date.now().toString(36)}-${randomBytes(6).toString("hex")}`;
    const partial = path.join(txDir, id + PARTIAL);
    const final = path.join(txDir, id);
    await mkdir(partial);
    let record: IntentRecord;
    try {
      const captured = new Map<string, StoredBefore>();
      const entries: StoredEntry[] = [];
      let blobs = 0;
      const blobName = () => `b${blobs++}`;
      for (const file of files) {
        let before: StoredBefore = { kind: "absent" };
        if ("capture" in file.before) {
          before = await captureBefore(file.before.capture, partial, blobName());
          captured.set(file.before.capture, before);
        }
        entries.push({ rel: file.rel, target: file.target, before, after: { kind: "absent" } });
      }
      for (const [index, file] of files.entries()) {
        const entry = entries[index] as StoredEntry;
        if ("bytes" in file.after) {
          const name = blobName();
          await writeDurable(path.join(partial, name), file.after.bytes);
          entry.after = { kind: "file", blob: name, ...(file.after.mode === undefined ? {} : { mode: file.after.mode & 0o7777 }) };
        } else if ("sameAsBeforeOf" in file.after) {
          const source = captured.get(file.after.sameAsBeforeOf);
          if (source === undefined || source.kind === "absent") throw new Error("journal: a move's source was not captured");
          entry.after = source;
        }
      }
      const createdDirs = await missingParents(files.filter((f) => !("absent" in f.after)).map((f) => f.target));
      record = {
        version: 1,
        id,
        tool,
        ...(callId === undefined ? {} : { call_id: callId }),
        started_at: new Date().toISOString(),
        entries,
        created_dirs: createdDirs,
      };
      record.mac = mac(record);
      await writeDurable(path.join(partial, INTENT), Buffer.from(JSON.stringify(record)));
      await fsyncPath(partial);
      await step("intent_written");
      // The rename is what makes the intent count: a `.partial` directory is discarded unread.
      await rename(partial, final);
      await fsyncPath(txDir);
      await step("intent_durable");
    } catch (error) {
      await rm(partial, { recursive: true, force: true }).catch(() => undefined);
      throw error;
    }
    let committed = false;
    return {
      id,
      commit: async () => {
        await writeDurable(path.join(final, COMMITTED), Buffer.from(new Date().toISOString()));
        await fsyncPath(final);
        committed = true;
        await step("committed");
      },
      done: async () => {
        // Once, whichever comes first: the answer's fate, or a later transaction on the same files.
        let forgotten: Promise<void> | undefined;
        const forget = (fate: "sent" | "lost") =>
          (forgotten ??= track(async () => {
            awaitingAnswer.delete(id);
            if (fate === "lost") await recordOutcome(record, committed);
            await discard(final);
          }));
        awaitingAnswer.set(id, { targets, forget: () => forget("sent") });
        if (options.afterAnswer?.((fate) => void forget(fate)) !== true) await forget("sent");
      },
      rollback: () => rollBack(final, record),
    };
  }

  async function recover(): Promise<RecoveredTransaction[]> {
    await ensure();
    const results: RecoveredTransaction[] = [];
    const names = (await readdir(txDir)).sort();
    for (const name of names.filter((n) => n.endsWith(PARTIAL) || n.endsWith(DISCARDED))) {
      // An intent never made durable (nothing was written), or one already finished.
      await rm(path.join(txDir, name), { recursive: true, force: true });
    }
    // Unfinished transactions are rolled back newest first, then committed ones completed oldest
    // first, so two records touching one file leave it as their order requires.
    const open = names.filter((n) => !n.endsWith(PARTIAL) && !n.endsWith(DISCARDED));
    const committedFirst = await Promise.all(open.map(async (n) => ({ n, committed: await exists(path.join(txDir, n, COMMITTED)) })));
    const ordered = [
      ...committedFirst
        .filter((t) => !t.committed)
        .map((t) => t.n)
        .reverse(),
      ...committedFirst.filter((t) => t.committed).map((t) => t.n),
    ];
    for (const name of ordered) {
      const dir = path.join(txDir, name);
      let record: IntentRecord;
      try {
        record = JSON.parse(await readFile(path.join(dir, INTENT), "utf8")) as IntentRecord;
      } catch {
        await rm(dir, { recursive: true, force: true });
        continue;
      }
      if (!trusted(record)) {
        // Planted, or from a journal whose key is gone: never replayed.
        await rm(dir, { recursive: true, force: true });
        continue;
      }
      const committed = await exists(path.join(dir, COMMITTED));
      await step(committed ? "recover_complete" : "recover_rollback");
      if (committed) await rollForward(dir, record);
      else await rollBack(dir, record);
      await removeStrayTemps(record);
      // The outcome is durable before the intent goes: a crash in between repeats an idempotent recovery.
      const outcome = await recordOutcome(record, committed);
      await discard(dir);
      results.push(outcome);
    }
    return results;
  }

  /** Runs a record's forgetting (its failure is the next recovery's to mend), counted until done for `settled`. */
  function track(work: () => Promise<void>): Promise<void> {
    const running = work()
      .catch(() => undefined)
      .finally(() => forgetting.delete(running));
    forgetting.add(running);
    return running;
  }

  async function recordOutcome(record: IntentRecord, committed: boolean): Promise<RecoveredTransaction> {
    const outcome: RecoveredTransaction = {
      transaction_id: record.id,
      ...(record.call_id === undefined ? {} : { call_id: record.call_id }),
      tool: record.tool,
      outcome: committed ? "completed" : "rolled_back",
      paths: record.entries.map((e) => e.rel),
      started_at: record.started_at,
      recovered_at: new Date().toISOString(),
    };
    await writeDurable(path.join(outcomeDir, `${record.id}.json`), Buffer.from(JSON.stringify(outcome)), "w");
    await fsyncPath(outcomeDir);
    return outcome;
  }

  /** Forgets a record: one atomic rename first, so a crash mid-removal never leaves a torn record that recovery would act on. */
  async function discard(dir: string): Promise<void> {
    const gone = dir + DISCARDED;
    await rename(dir, gone);
    await fsyncPath(txDir).catch(() => undefined);
    await rm(gone, { recursive: true, force: true });
  }

  async function recovered(): Promise<RecoveredTransaction[]> {
    await ensure();
    const out: RecoveredTransaction[] = [];
    for (const name of (await readdir(outcomeDir)).filter((n) => n.endsWith(".json"))) {
      try {
        out.push(JSON.parse(await readFile(path.join(outcomeDir, name), "utf8")) as RecoveredTransaction);
      } catch {
        // A torn outcome file (crash while writing it) is rewritten by the next recovery.
      }
    }
    return out.sort((a, b) => a.recovered_at.localeCompare(b.recovered_at));
  }

  const settled = async () => {
    while (forgetting.size > 0) await Promise.allSettled([...forgetting]);
  };

  return { dir: root, begin, recover, recovered, settled };
}

// ---------------------------------------------------------------- recovery steps

async function rollBack(dir: string, record: IntentRecord): Promise<void> {
  for (const entry of [...record.entries].reverse()) {
    await install(dir, entry.target, entry.before);
  }
  for (const created of [...record.created_dirs].reverse()) {
    await rmdir(created).catch((error: unknown) => {
      const code = errnoCode(error);
      if (code !== "ENOENT" && code !== "ENOTEMPTY" && code !== "EEXIST") throw error;
    });
  }
}

async function rollForward(dir: string, record: IntentRecord): Promise<void> {
  for (const entry of record.entries) {
    if (entry.after.kind !== "absent") await mkdir(path.dirname(entry.target), { recursive: true });
    await install(dir, entry.target, entry.after);
  }
}

/** Puts `target` into `state` (idempotent): absent, a file with the blob's bytes, or a symlink. */
async function install(dir: string, target: string, state: StoredBefore | StoredAfter): Promise<void> {
  if (state.kind === "absent") {
    await rm(target, { force: true });
    return;
  }
  const temp = path.join(path.dirname(target), `.wc-tmp-${randomBytes(6).toString("hex")}`);
  try {
    if (state.kind === "symlink") {
      await symlink(state.link, temp);
    } else {
      await copyFile(path.join(dir, state.blob), temp);
      const mode = "mode" in state && state.mode !== undefined ? state.mode : 0o666 & ~process.umask();
      const handle = await open(temp, "r+");
      try {
        await handle.chmod(mode & 0o7777);
        await handle.sync();
      } finally {
        await handle.close();
      }
    }
    await inheritOwner(temp, target);
    await rename(temp, target);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => undefined);
    throw error;
  }
  await fsyncPath(path.dirname(target)).catch(() => undefined);
}

/** Temp files the transaction may have left beside its targets (`.wc-tmp-…`, `.wc-new-…`, `.wc-del-…`). */
async function removeStrayTemps(record: IntentRecord): Promise<void> {
  const dirs = new Set(record.entries.map((e) => path.dirname(e.target)));
  for (const dir of dirs) {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch {
      continue;
    }
    for (const name of names.filter((n) => TEMP_NAME.test(n))) await rm(path.join(dir, name), { force: true });
  }
}

// ---------------------------------------------------------------- durable primitives

async function captureBefore(source: string, dir: string, name: string): Promise<StoredBefore> {
  const info = await lstat(source);
  if (info.isSymbolicLink()) return { kind: "symlink", link: await readlink(source) };
  const blob = path.join(dir, name);
  try {
    // The transaction replaces files by rename, never in place, so a hard link keeps the original bytes.
    await link(source, blob);
  } catch {
    await copyFile(source, blob);
  }
  await fsyncPath(blob);
  return { kind: "file", blob: name, mode: info.mode & 0o7777 };
}

async function writeDurable(file: string, data: Uint8Array, flag: "wx" | "w" = "wx"): Promise<void> {
  await writeFile(file, data, { flag, mode: 0o600 });
  await fsyncPath(file);
}

async function fsyncPath(target: string): Promise<void> {
  const handle = await open(target, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function exists(target: string): Promise<boolean> {
  try {
    await lstat(target);
    return true;
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return false;
    throw error;
  }
}

async function missingParents(targets: readonly string[]): Promise<string[]> {
  const missing = new Set<string>();
  for (const target of targets) {
    for (let dir = path.dirname(target); dir !== path.dirname(dir) && !(await exists(dir)); dir = path.dirname(dir)) missing.add(dir);
  }
  return [...missing].sort((a, b) => a.length - b.length);
}

/** The default state directory for a workspace: a sibling of its root, never inside it. */
export function defaultJournalDir(root: string): string {
  const resolved = path.resolve(root);
  return path.join(path.dirname(resolved), `.${path.basename(resolved)}.webcodex-runner-state`);
}

/** The shape of a prepared transaction change the journal needs (structurally matched by the edit transaction's). */
export type JournalChange =
  | { kind: "edit"; path: string; target: string; mode: number; plan: { changed: boolean; output: Uint8Array } }
  | { kind: "replace"; path: string; target: string; mode: number; bytes: Uint8Array }
  | { kind: "create"; path: string; target: string; bytes: Uint8Array }
  | { kind: "delete"; path: string; target: string }
  | { kind: "move"; path: string; destination: string; source: string; target: string };

/** Before/after specs for the changes that write (an edit that changes nothing is left out). */
export function journalSpecsFor(changes: readonly JournalChange[]): JournalFileSpec[] {
  const specs: JournalFileSpec[] = [];
  for (const change of changes) {
    switch (change.kind) {
      case "edit":
        if (change.plan.changed)
          specs.push({ rel: change.path, target: change.target, before: { capture: change.target }, after: { bytes: change.plan.output, mode: change.mode } });
        break;
      case "replace":
        specs.push({ rel: change.path, target: change.target, before: { capture: change.target }, after: { bytes: change.bytes, mode: change.mode } });
        break;
      case "create":
        specs.push({ rel: change.path, target: change.target, before: { absent: true }, after: { bytes: change.bytes } });
        break;
      case "delete":
        specs.push({ rel: change.path, target: change.target, before: { capture: change.target }, after: { absent: true } });
        break;
      case "move":
        specs.push({ rel: change.path, target: change.source, before: { capture: change.source }, after: { absent: true } });
        specs.push({ rel: change.destination, target: change.target, before: { absent: true }, after: { sameAsBeforeOf: change.source } });
        break;
    }
  }
  return specs;
}
