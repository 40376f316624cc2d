/**
 * Parsers from each validator's machine-readable output (or, where the toolchain has none, its
 * documented human format, marked as such) to a ParsedRun. Shared rules:
 * - a run that was killed (signal) is `error` whatever it printed;
 * - `passed` only when the output positively says so in the format expected (a summary, a
 *   complete JSON document, an exit code the tool documents as "clean");
 * - output that cannot be read is `unparsed` (the engine attaches a bounded raw tail), and a
 *   run whose output was cut can be `failed` (problems were seen) but never `passed`.
 *
 * One concept over 400 lines: the validator output parsers, one per toolchain, under the shared
 * rules above.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { XMLParser } from "fast-xml-parser";
import type { CheckKind, ParsedRun, Parser, RunOutput, TestCounts, ValidationFailure } from "./types.js";

const MESSAGE_CHARS = 400;

/** A message cut to a bounded size, on one line where the tool gave several. */
export function clip(message: string): string {
  const text = message.replace(/\s+$/u, "");
  return text.length <= MESSAGE_CHARS ? text : `${text.slice(0, MESSAGE_CHARS - 1)}…`;
}

/** A path as the project sees it: relative to the root when inside it, else as given. */
export function projectPath(root: string, cwd: string, file: string): string {
  const cleaned = file.startsWith("file://") ? decodeURIComponent(new URL(file).pathname) : file;
  const abs = path.resolve(cwd, cleaned);
  const rel = path.relative(root, abs);
  return rel === "" || rel.startsWith("..") || path.isAbsolute(rel) ? cleaned : rel.split(path.sep).join("/");
}

/** The verdict rules every parser shares, applied to what it found. */
function verdict(
  out: RunOutput,
  found: { failures: ValidationFailure[]; recognized: boolean; failed?: boolean },
  extra: Omit<ParsedRun, "status" | "failures"> = {},
): ParsedRun {
  const errors = found.failures.filter((f) => f.severity !== "warning").length;
  const failed = found.failed === true || errors > 0;
  const base = { ...extra, failures: found.failures };
  if (out.signal !== null) return { ...base, status: "error", detail: "killed" };
  if (failed) return { ...base, status: "failed", ...(out.truncated ? { detail: "output_truncated" } : {}) };
  if (out.truncated) return { ...base, status: "unparsed", detail: "output_truncated" };
  if (!found.recognized) return { ...base, status: "unparsed", detail: "output_format_unknown" };
  if (out.exitCode !== 0) return { ...base, status: "unparsed", detail: "nonzero_exit_without_findings" };
  return { ...base, status: "passed" };
}

// ── TypeScript compiler (`tsc --noEmit --pretty false`) ──

const TSC_LOCATED = /^(.+?)\((\d+),(\d+)\): (error|warning) (TS\d+): (.*)$/u;
const TSC_GLOBAL = /^(error|warning) (TS\d+): (.*)$/u;

export function tscDiagnostics(text: string, out: Pick<RunOutput, "root" | "cwd">, check: CheckKind): ValidationFailure[] {
  const failures: ValidationFailure[] = [];
  for (const line of text.split("\n")) {
    const located = TSC_LOCATED.exec(line);
    const global = located ? null : TSC_GLOBAL.exec(line);
    if (located) {
      const [, file, l, c, sev, code, msg] = located as unknown as [string, string, string, string, string, string, string];
      failures.push({
        check,
        path: projectPath(out.root, out.cwd, file),
        line: Number(l),
        column: Number(c),
        code,
        ...(sev === "warning" ? { severity: "warning" as const } : {}),
        message: clip(msg),
      });
    } else if (global) {
      const [, sev, code, msg] = global as unknown as [string, string, string, string];
      failures.push({ check, code, ...(sev === "warning" ? { severity: "warning" as const } : {}), message: clip(msg) });
    } else if (/^\s+\S/u.test(line) && failures.length > 0) {
      const last = failures[failures.length - 1] as ValidationFailure;
      last.message = clip(`${last.message} ${line.trim()}`);
    }
  }
  return failures;
}

export const parseTsc: Parser = (out) => {
  const failures = tscDiagnostics(`${out.stdout}\n${out.stderr}`, out, "typecheck");
  const errors = failures.filter((f) => f.severity !== "warning").length;
  // tsc prints nothing on success; exit 0 with empty output is its documented clean result.
  const recognized = failures.length > 0 || (out.stdout.trim() === "" && out.exitCode === 0);
  return verdict(out, { failures, recognized, failed: out.exitCode !== 0 && errors > 0 }, { diagnostics: { errors, warnings: failures.length - errors } });
};

// ── ESLint (`--format json`) ──

interface EslintMessage {
  ruleId?: string | null;
  severity?: number;
  message?: string;
  line?: number;
  column?: number;
  fatal?: boolean;
}
interface EslintFile {
  filePath?: string;
  messages?: EslintMessage[];
}

export const parseEslint: Parser = (out) => {
  let files: EslintFile[];
  try {
    const parsed: unknown = JSON.parse(out.stdout);
    if (!Array.isArray(parsed)) throw new Error("not an array");
    files = parsed as EslintFile[];
  } catch {
    return verdict(out, { failures: [], recognized: false });
  }
  const failures: ValidationFailure[] = [];
  for (const file of files) {
    for (const m of file.messages ?? []) {
      const warning = m.severity === 1 && m.fatal !== true;
      failures.push({
        check: "lint",
        ...(file.filePath ? { path: projectPath(out.root, out.cwd, file.filePath) } : {}),
        ...(m.line !== undefined ? { line: m.line } : {}),
        ...(m.column !== undefined ? { column: m.column } : {}),
        ...(m.ruleId ? { code: m.ruleId } : {}),
        ...(warning ? { severity: "warning" as const } : {}),
        message: clip(m.message ?? "lint problem"),
      });
    }
  }
  const errors = failures.filter((f) => f.severity !== "warning").length;
  // ESLint exits 1 for lint errors and 2 for a crash or bad configuration.
  if (out.exitCode === 2) return { status: "error", failures, detail: "eslint_fatal" };
  return verdict(out, { failures, recognized: true }, { diagnostics: { errors, warnings: failures.length - errors } });
};

// ── node:test (TAP reporter) ──

const TAP_RESULT = /^(\s*)(ok|not ok) \d+ - (.*?)(?:\s+# (SKIP|TODO)\b.*)?$/u;

function tapYamlBlock(lines: string[], start: number, indent: string): { fields: Map<string, string>; stack: string[]; end: number } {
  const fields = new Map<string, string>();
  const stack: string[] = [];
  let i = start;
  if (lines[i]?.trim() !== "---") return { fields, stack, end: start };
  i++;
  let current: string | undefined;
  const body: string[] = [];
  for (; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line.trim() === "..." && line.startsWith(indent)) break;
    const keyed = /^\s{2,}([a-zA-Z_]+):\s?(.*)$/u.exec(line);
    if (keyed && line.length - line.trimStart().length === indent.length + 2) {
      if (current !== undefined) fields.set(current, body.join("\n").trim());
      body.length = 0;
      current = keyed[1] as string;
      const value = (keyed[2] as string).trim();
      if (value !== "|-" && value !== "|" && value !== ">-") body.push(value.replace(/^'(.*)'$/u, "$1"));
    } else if (current !== undefined) {
      if (current === "stack") stack.push(line.trim());
      body.push(line.trim());
    }
  }
  if (current !== undefined) fields.set(current, body.join("\n").trim());
  return { fields, stack, end: i };
}

export const parseNodeTestTap: Parser = (out) => {
  const lines = out.stdout.split("\n");
  const failures: ValidationFailure[] = [];
  const summary = new Map<string, number>();
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const sum = /^# (tests|pass|fail|skipped|todo|cancelled) (\d+)$/u.exec(line);
    if (sum) summary.set(sum[1] as string, Number(sum[2]));
    const result = TAP_RESULT.exec(line);
    if (!result || result[2] !== "not ok" || result[4] !== undefined) continue;
    const { fields, stack, end } = tapYamlBlock(lines, i + 1, result[1] as string);
    i = end;
    // A suite failing only because a subtest failed adds nothing: the subtest is reported.
    if (fields.get("failureType") === "subtestsFailed") continue;
    const name = (result[3] as string).replace(/\\#/gu, "#");
    const failure: ValidationFailure = {
      check: "test",
      test: name,
      message: clip((fields.get("error") ?? "test failed").split("\n").find((l) => l.trim() !== "") ?? "test failed"),
    };
    // The first stack frame inside the project (not node_modules) is where the assertion failed.
    const frame = stack
      .map((s) => /\(?((?:file:\/\/)?\/[^():]+):(\d+):(\d+)\)?$/u.exec(s))
      .find((m) => {
        if (!m) return false;
        const p = projectPath(out.root, out.cwd, m[1] as string);
        return !p.startsWith("/") && !p.includes("node_modules/");
      });
    const location = frame ?? /^((?:file:\/\/)?\/.+):(\d+):(\d+)$/u.exec(fields.get("location") ?? "");
    if (location) {
      failure.path = projectPath(out.root, out.cwd, location[1] as string);
      failure.line = Number(location[2]);
      failure.column = Number(location[3]);
    }
    const code = fields.get("code");
    if (code) failure.code = code;
    failures.push(failure);
  }
  const recognized = summary.has("tests") && summary.has("pass") && summary.has("fail");
  const tests: TestCounts | undefined = recognized
    ? {
        passed: summary.get("pass") ?? 0,
        failed: (summary.get("fail") ?? 0) + (summary.get("cancelled") ?? 0),
        skipped: (summary.get("skipped") ?? 0) + (summary.get("todo") ?? 0),
      }
    : undefined;
  return verdict(out, { failures, recognized, failed: (tests?.failed ?? 0) > 0 }, tests ? { tests } : {});
};

// ── Jest / Vitest (`--json` / `--reporter=json`) ──

interface JestAssertion {
  fullName?: string;
  title?: string;
  status?: string;
  failureMessages?: string[];
  location?: { line?: number; column?: number } | null;
}
interface JestFile {
  name?: string;
  assertionResults?: JestAssertion[];
  message?: string;
  status?: string;
}
interface JestReport {
  numPassedTests?: number;
  numFailedTests?: number;
  numPendingTests?: number;
  numTodoTests?: number;
  testResults?: JestFile[];
}

export const parseJestJson: Parser = (out) => {
  let report: JestReport;
  try {
    report = JSON.parse(out.report ?? out.stdout) as JestReport;
    if (typeof report !== "object" || report === null || !Array.isArray(report.testResults)) throw new Error("not a report");
  } catch {
    return verdict(out, { failures: [], recognized: false });
  }
  const failures: ValidationFailure[] = [];
  for (const file of report.testResults ?? []) {
    const filePath = file.name ? projectPath(out.root, out.cwd, file.name) : undefined;
    const failed = (file.assertionResults ?? []).filter((a) => a.status === "failed");
    for (const a of failed) {
      const text = (a.failureMessages ?? []).join("\n");
      const frame = file.name ? new RegExp(`${file.name.replace(/[.*+?^${}()|[\]\\]/gu, "\\$&")}:(\\d+):(\\d+)`, "u").exec(text) : null;
      const line = frame ? Number(frame[1]) : (a.location?.line ?? undefined);
      const column = frame ? Number(frame[2]) : (a.location?.column ?? undefined);
      failures.push({
        check: "test",
        test: a.fullName ?? a.title ?? "test",
        ...(filePath ? { path: filePath } : {}),
        ...(line !== undefined ? { line } : {}),
        ...(column !== undefined ? { column } : {}),
        message: clip(text.split("\n").find((l) => l.trim() !== "") ?? "test failed"),
      });
    }
    // A file that failed to run at all (syntax error, missing import) has no assertion results.
    if (failed.length === 0 && file.status === "failed") {
      failures.push({
        check: "test",
        ...(filePath ? { path: filePath } : {}),
        message: clip((file.message ?? "test file failed").trim().split("\n")[0] ?? "test file failed"),
      });
    }
  }
  const tests = { passed: report.numPassedTests ?? 0, failed: report.numFailedTests ?? 0, skipped: (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0) };
  return verdict(out, { failures, recognized: true, failed: tests.failed > 0 || failures.length > 0 }, { tests });
};

// ── pytest (`--junitxml`) ──

const xml = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: "",
  textNodeName: "text",
  isArray: (name) => ["testsuite", "testcase", "failure", "error", "skipped"].includes(name),
});

interface JunitOutcome {
  message?: string;
  text?: string;
  type?: string;
}
interface JunitCase {
  classname?: string;
  name?: string;
  file?: string;
  line?: string;
  failure?: (JunitOutcome | string)[];
  error?: (JunitOutcome | string)[];
  skipped?: unknown[];
}

export const parsePytestJunit: Parser = (out) => {
  let suites: Array<{ testcase?: JunitCase[] }>;
  try {
    if (out.report === undefined || out.report.trim() === "") throw new Error("no report");
    const doc = xml.parse(out.report) as { testsuites?: { testsuite?: Array<{ testcase?: JunitCase[] }> }; testsuite?: Array<{ testcase?: JunitCase[] }> };
    suites = doc.testsuites?.testsuite ?? doc.testsuite ?? [];
    if (!Array.isArray(suites) || suites.length === 0) throw new Error("no suites");
  } catch {
    return verdict(out, { failures: [], recognized: false });
  }
  const failures: ValidationFailure[] = [];
  const tests: TestCounts = { passed: 0, failed: 0, skipped: 0 };
  for (const suite of suites) {
    for (const c of suite.testcase ?? []) {
      const bad = [...(c.failure ?? []), ...(c.error ?? [])];
      if (bad.length > 0) {
        tests.failed++;
        const first = bad[0] as JunitOutcome | string;
        const text = typeof first === "string" ? first : (first.text ?? "");
        const message = typeof first === "string" ? (first.split("\n")[0] ?? "") : (first.message ?? text.split("\n")[0] ?? "");
        // pytest ends a failure's traceback with "path:line: ExceptionType" for the failing frame.
        const frames = [...text.matchAll(/^([^\s:][^:\n]*\.py):(\d+): /gmu)];
        const frame = frames.find((m) => !projectPath(out.root, out.cwd, m[1] as string).startsWith("/")) ?? frames[frames.length - 1];
        const name = c.classname ? `${c.classname}.${c.name ?? ""}` : (c.name ?? "test");
        failures.push({
          check: "test",
          test: name,
          ...(frame
            ? { path: projectPath(out.root, out.cwd, frame[1] as string), line: Number(frame[2]) }
            : c.file
              ? { path: projectPath(out.root, out.cwd, c.file), ...(c.line ? { line: Number(c.line) + 1 } : {}) }
              : {}),
          message: clip(message || "test failed"),
        });
      } else if ((c.skipped ?? []).length > 0) tests.skipped++;
      else tests.passed++;
    }
  }
  // pytest exit 5: no tests were collected; that is not a pass.
  if (out.exitCode === 5) return { status: "error", failures, tests, detail: "no_tests_collected" };
  return verdict(out, { failures, recognized: true, failed: tests.failed > 0 }, { tests });
};

// ── python -m unittest (verbose text; used when pytest is not installed) ──

export const parseUnittest: Parser = (out) => {
  const text = `${out.stderr}\n${out.stdout}`;
  const ran = /^Ran (\d+) tests? in /mu.exec(text);
  const failures: ValidationFailure[] = [];
  const tests: TestCounts = { passed: 0, failed: 0, skipped: 0 };
  for (const m of text.matchAll(/^(\w+) \(([\w.]+)\)(?:\n.*)?? \.\.\. (ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$/gmu)) {
    const outcome = m[3] as string;
    if (outcome === "ok" || outcome === "expected failure") tests.passed++;
    else if (outcome.startsWith("skipped")) tests.skipped++;
    else tests.failed++;
  }
  const blocks = text.split(/^={20,}$/mu).slice(1);
  for (const block of blocks) {
    const head = /^(FAIL|ERROR): (\w+) \(([\w.]+)\)/mu.exec(block.trim());
    if (!head) continue;
    const frames = [...block.matchAll(/File "([^"]+)", line (\d+), in /gu)].filter((f) => !projectPath(out.root, out.cwd, f[1] as string).startsWith("/"));
    const frame = frames[frames.length - 1];
    const lines =
      block
        .split(/^-{20,}$/mu)[1]
        ?.trim()
        .split("\n") ?? [];
    const qualified = (head[3] as string).endsWith(`.${head[2] as string}`) ? (head[3] as string) : `${head[3] as string}.${head[2] as string}`;
    failures.push({
      check: "test",
      test: qualified,
      ...(frame ? { path: projectPath(out.root, out.cwd, frame[1] as string), line: Number(frame[2]) } : {}),
      message: clip(lines[lines.length - 1] ?? `${head[1] as string}`),
    });
  }
  if (ran && Number(ran[1]) === 0) return { status: "error", failures, tests, detail: "no_tests_collected", format: "unittest_text" };
  return verdict(
    out,
    { failures, recognized: ran !== null && /^(OK|FAILED)\b/mu.test(text), failed: tests.failed > 0 || failures.length > 0 },
    { tests, format: "unittest_text" },
  );
};

// ── Go: `go vet` / `go build` (compiler-style lines) and `go test -json` ──

const GO_POSITION = /^(?:vet: )?(\.{0,2}\/?[^\s:#][^:\n]*\.go):(\d+)(?::(\d+))?: (.*)$/u;

export function goPositions(text: string, out: Pick<RunOutput, "root" | "cwd">, check: CheckKind): ValidationFailure[] {
  const failures: ValidationFailure[] = [];
  for (const line of text.split("\n")) {
    const m = GO_POSITION.exec(line);
    if (m) {
      failures.push({
        check,
        path: projectPath(out.root, out.cwd, m[1] as string),
        line: Number(m[2]),
        ...(m[3] ? { column: Number(m[3]) } : {}),
        message: clip(m[4] as string),
      });
    } else if (/^\t\S/u.test(line) && failures.length > 0) {
      const last = failures[failures.length - 1] as ValidationFailure;
      last.message = clip(`${last.message} ${line.trim()}`);
    }
  }
  return failures;
}

/**
 * go's own usage errors (no module, a pattern no module holds or that matches nothing, a
 * go.work member that is missing): the toolchain refused the request, so the run is `error`
 * with a detail code naming why, never `unparsed`.
 */
const GO_USAGE: ReadonlyArray<[RegExp, string]> = [
  [
    /cannot load module .* listed in go\.work|open \S*go\.mod: no such file|go\.work.*(?:no such file|does not exist)|reading go\.work/u,
    "go_workspace_member_missing",
  ],
  [
    /go\.mod file not found|cannot find main module|directory prefix \. does not contain main module|not in a module|outside (?:main module|module root)/u,
    "go_module_not_found",
  ],
  [/does not contain (?:main module|modules listed in go\.work)|outside modules listed in go\.work|is not in (?:std|GOROOT)/u, "go_package_outside_module"],
  [
    /matched no packages|no packages to test|directory not found|cannot find package|no required module provides package|malformed import path|invalid pattern|no Go files in|not a directory/u,
    "go_package_pattern_invalid",
  ],
];

export function goUsageError(out: RunOutput, check: CheckKind): ParsedRun | undefined {
  if (out.exitCode === 0 || out.signal !== null) return undefined;
  for (const line of out.stderr.split("\n")) {
    const hit = GO_USAGE.find(([re]) => re.test(line));
    if (hit) return { status: "error", detail: hit[1], failures: [{ check, message: clip(line.split(`${out.root}/`).join("")) }] };
  }
  return undefined;
}

export function parseGoCompilerStyle(check: CheckKind): Parser {
  return (out) => {
    const failures = goPositions(`${out.stderr}\n${out.stdout}`, out, check);
    // go vet / go build print nothing and exit 0 when clean.
    const recognized = failures.length > 0 || (out.exitCode === 0 && `${out.stdout}${out.stderr}`.replace(/^#.*$/gmu, "").trim() === "");
    if (failures.length === 0) {
      const usage = goUsageError(out, check);
      if (usage) return usage;
    }
    return verdict(out, { failures, recognized }, { diagnostics: { errors: failures.length, warnings: 0 } });
  };
}

interface GoEvent {
  Action?: string;
  Package?: string;
  Test?: string;
  Output?: string;
}

/** go test -json: `modulePath` maps import paths to directories under the module root. */
export function parseGoTestJson(modulePath: string | undefined): Parser {
  return (out) => {
    const outputs = new Map<string, string[]>();
    const results = new Map<string, { pkg: string; test?: string; action: string }>();
    const packages = new Map<string, string>();
    let events = 0;
    for (const line of out.stdout.split("\n")) {
      if (!line.startsWith("{")) continue;
      let e: GoEvent;
      try {
        e = JSON.parse(line) as GoEvent;
      } catch {
        continue;
      }
      events++;
      const key = `${e.Package ?? ""}\u0000${e.Test ?? ""}`;
      if (e.Action === "output" && e.Output !== undefined) (outputs.get(key) ?? outputs.set(key, []).get(key))?.push(e.Output);
      if (e.Action === "pass" || e.Action === "fail" || e.Action === "skip") {
        if (e.Test !== undefined) results.set(key, { pkg: e.Package ?? "", test: e.Test, action: e.Action });
        else if (e.Package !== undefined) packages.set(e.Package, e.Action);
      }
    }
    // The module's directory in the project: go reports test positions relative to the package.
    const moduleDir = path.relative(out.root, out.cwd).split(path.sep).join("/");
    const pkgDir = (pkg: string) => (modulePath && (pkg === modulePath || pkg.startsWith(`${modulePath}/`)) ? pkg.slice(modulePath.length + 1) : "");
    const failures: ValidationFailure[] = [];
    const tests: TestCounts = { passed: 0, failed: 0, skipped: 0 };
    const failedNames = [...results.values()].filter((r) => r.action === "fail").map((r) => `${r.pkg}\u0000${r.test ?? ""}`);
    for (const [key, r] of results) {
      if (r.action === "pass") tests.passed++;
      else if (r.action === "skip") tests.skipped++;
      else {
        tests.failed++;
        // A parent whose subtest failed is reported through the subtest.
        if (failedNames.some((k) => k.startsWith(`${key}/`))) continue;
        const text = (outputs.get(key) ?? []).join("");
        const pos = /^\s+([\w./-]+\.go):(\d+): (.*)$/mu.exec(text);
        const dir = pkgDir(r.pkg);
        failures.push({
          check: "test",
          test: r.test as string,
          ...(pos ? { path: path.posix.join(moduleDir, dir, pos[1] as string), line: Number(pos[2]) } : {}),
          message: clip(
            pos ? (pos[3] as string) : (text.split("\n").find((l) => l.trim() !== "" && !l.startsWith("=== ") && !l.startsWith("--- ")) ?? "test failed"),
          ),
        });
      }
    }
    // Build failures: the compiler's positions on stderr (and a "[build failed]" line on stdout).
    const build = goPositions(out.stderr, out, "test");
    failures.unshift(...build);
    const pkgFailed = [...packages.values()].includes("fail") || /\[build failed\]|\[setup failed\]/u.test(out.stdout);
    const recognized = events > 0 && (packages.size > 0 || results.size > 0);
    if (!recognized && build.length === 0) {
      const usage = goUsageError(out, "test");
      if (usage) return usage;
    }
    return verdict(out, { failures, recognized: recognized || build.length > 0, failed: tests.failed > 0 || build.length > 0 || pkgFailed }, { tests });
  };
}

// ── Rust: cargo JSON messages (check/build/test) and libtest's human output ──

interface CargoSpan {
  file_name?: string;
  line_start?: number;
  column_start?: number;
  is_primary?: boolean;
}
interface CargoMessage {
  reason?: string;
  success?: boolean;
  message?: { level?: string; message?: string; code?: { code?: string } | null; spans?: CargoSpan[] };
}

function cargoMessages(
  stdout: string,
  out: RunOutput,
  check: CheckKind,
): { failures: ValidationFailure[]; messages: number; finished?: boolean; other: string[] } {
  const failures: ValidationFailure[] = [];
  const other: string[] = [];
  let messages = 0;
  let finished: boolean | undefined;
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("{")) {
      other.push(line);
      continue;
    }
    let m: CargoMessage;
    try {
      m = JSON.parse(line) as CargoMessage;
    } catch {
      other.push(line);
      continue;
    }
    messages++;
    if (m.reason === "build-finished") finished = m.success === true;
    if (m.reason !== "compiler-message" || !m.message) continue;
    const level = m.message.level ?? "";
    if (level !== "error" && level !== "warning") continue;
    const span = (m.message.spans ?? []).find((s) => s.is_primary) ?? m.message.spans?.[0];
    // "aborting due to N previous errors" and similar summaries carry no position and add nothing.
    if (!span && /^aborting due to|^\d+ warnings? emitted|could not compile/u.test(m.message.message ?? "")) continue;
    failures.push({
      check,
      ...(span?.file_name ? { path: projectPath(out.root, cargoBase(out), span.file_name) } : {}),
      ...(span?.line_start !== undefined ? { line: span.line_start } : {}),
      ...(span?.column_start !== undefined ? { column: span.column_start } : {}),
      ...(m.message.code?.code ? { code: m.message.code.code } : {}),
      ...(level === "warning" ? { severity: "warning" as const } : {}),
      message: clip(m.message.message ?? level),
    });
  }
  return { failures, messages, ...(finished === undefined ? {} : { finished }), other };
}

/** Cargo reports paths relative to its workspace root: the nearest `[workspace]` manifest from the run's directory up to the project root. */
function cargoBase(out: Pick<RunOutput, "root" | "cwd">): string {
  for (let d = out.cwd; ; d = path.dirname(d)) {
    try {
      if (/^\[workspace\]/mu.test(readFileSync(path.join(d, "Cargo.toml"), "utf8"))) return d;
    } catch {
      /* no manifest here */
    }
    if (d === out.root || path.relative(out.root, d).startsWith("..") || d === path.dirname(d)) return out.cwd;
  }
}

/** Cargo's own refusal, named: a package that is not in the workspace, no manifest, a missing workspace member. */
function cargoErrorDetail(stderr: string): string {
  if (/did not match any packages|package ID specification/u.test(stderr)) return "cargo_package_not_found";
  if (/failed to load manifest for workspace member|failed to read .*Cargo\.toml/u.test(stderr)) return "cargo_workspace_member_missing";
  if (/could not find `Cargo\.toml`/u.test(stderr)) return "cargo_manifest_not_found";
  return "cargo_error";
}

/** `cargo check|build --message-format=json`. */
export function parseCargoCheck(check: CheckKind): Parser {
  return (out) => {
    const { failures, messages, finished } = cargoMessages(out.stdout, out, check);
    const errors = failures.filter((f) => f.severity !== "warning").length;
    const diagnostics = { errors, warnings: failures.length - errors };
    // Cargo's own errors (bad manifest, missing package) arrive on stderr as "error: ...".
    if (finished === undefined && out.exitCode !== 0 && out.signal === null) {
      const cargoError = /^error: (.*)$/mu.exec(out.stderr);
      if (cargoError)
        return { status: "error", failures: [{ check, message: clip(cargoError[1] as string) }], diagnostics, detail: cargoErrorDetail(out.stderr) };
    }
    return verdict(out, { failures, recognized: messages > 0 && finished !== undefined, failed: finished === false || errors > 0 }, { diagnostics });
  };
}

/**
 * `cargo test --message-format=json`: compiler messages as JSON, the test binaries' libtest
 * output in its human format (libtest JSON needs an unstable flag), marked `libtest_human`.
 */
export const parseCargoTest: Parser = (out) => {
  const { failures: compile, finished, other } = cargoMessages(out.stdout, out, "test");
  const text = other.join("\n");
  const tests: TestCounts = { passed: 0, failed: 0, skipped: 0 };
  let summaries = 0;
  for (const m of text.matchAll(/^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored;/gmu)) {
    summaries++;
    tests.passed += Number(m[1]);
    tests.failed += Number(m[2]);
    tests.skipped += Number(m[3]);
  }
  const failures: ValidationFailure[] = compile.filter((f) => f.severity !== "warning");
  const failedTests = [...text.matchAll(/^test (\S+) \.\.\. FAILED$/gmu)].map((m) => m[1] as string);
  for (const name of failedTests) {
    const block = text.split(`---- ${name} stdout ----`)[1]?.split(/^---- \S+ stdout ----$|^failures:$/mu)[0] ?? "";
    // Older toolchains: panicked at 'msg', file:line:col. Newer: panicked at file:line:col:\nmsg.
    const old = /panicked at '([\s\S]*?)', ([^\s:]+):(\d+):(\d+)/u.exec(block);
    const recent = old ? null : /panicked at ([^\s:]+):(\d+):(\d+):\n([^\n]*)/u.exec(block);
    const [file, line, column, message] = old
      ? [old[2], old[3], old[4], old[1]]
      : recent
        ? [recent[1], recent[2], recent[3], recent[4]]
        : [undefined, undefined, undefined, block.trim().split("\n")[0]];
    failures.push({
      check: "test",
      test: name,
      ...(file ? { path: projectPath(out.root, cargoBase(out), file), line: Number(line), column: Number(column) } : {}),
      message: clip((message ?? "test failed").replace(/\s*\n\s*/gu, " ")),
    });
  }
  const compileFailed = finished === false || compile.some((f) => f.severity !== "warning");
  const result = verdict(
    out,
    { failures, recognized: summaries > 0, failed: compileFailed || tests.failed > 0 || failedTests.length > 0 },
    { tests, format: "libtest_human" },
  );
  if (result.status === "unparsed" && out.exitCode !== 0 && finished === undefined) {
    const cargoError = /^error: (.*)$/mu.exec(out.stderr);
    if (cargoError)
      return {
        status: "error",
        failures: [{ check: "test", message: clip(cargoError[1] as string) }],
        tests,
        detail: cargoErrorDetail(out.stderr),
        format: "libtest_human",
      };
  }
  return result;
};

/** A script whose output has no machine-readable form: its exit code and any tsc-style diagnostics. */
export const parseScriptBuild: Parser = (out) => {
  const failures = tscDiagnostics(`${out.stdout}\n${out.stderr}`, out, "build");
  if (out.signal !== null) return { status: "error", failures, detail: "killed" };
  if (out.exitCode === 0) return { status: "passed", failures: failures.filter((f) => f.severity === "warning") };
  return { status: "failed", failures: failures.length > 0 ? failures : [{ check: "build", message: clip(`build script exited ${String(out.exitCode)}`) }] };
};
