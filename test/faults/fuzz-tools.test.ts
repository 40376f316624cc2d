/**
 * Property-based input fuzzing (fast-check) over every admitted tool's input schema, through
 * the real path: MCP SDK client → `webcodex dev` gateway pipeline → services → Runner. Values
 * are valid-but-hostile (traversal, absolute and sensitive paths, NUL, huge and odd Unicode
 * strings, extreme numbers) or invalid shapes (wrong types, random JSON). Every call must
 * answer (no crash, no HTTP error), every failure must carry reason_code and failure_stage,
 * and nothing may be written outside the project. WEBCODEX_FAULTS_FUZZ_CASES sets the number
 * of cases (`make faults` runs 100,000; `make test` a bounded sample).
 */
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { toolDefinitions } from "@webcodex/contracts";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { openDevProject, type DevProject } from "../support/dev-project.js";
import { connectMcp } from "../support/mcp.js";
import { recordFigures } from "./figures.js";

const cases = Number(process.env["WEBCODEX_FAULTS_FUZZ_CASES"] ?? 250);
const CLIENT_CASES = 500;
const streams = Math.max(1, Number(process.env["WEBCODEX_FAULTS_FUZZ_STREAMS"] ?? 2));
const verbose = process.env["WEBCODEX_FAULTS_VERBOSE"] === "1";

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
};

const HOSTILE_STRINGS = [
  "",
  " ",
  ".",
  "..",
  "../",
  "../../../../etc/passwd",
  "/etc/passwd",
  "/",
  "~",
  "~/.ssh/id_rsa",
  ".git/config",
  ".git/HEAD",
  ".env",
  "a/../../outside.txt",
  "src/../../outside.txt",
  "%2e%2e/%2e%2e/x",
  "..\\..\\x",
  "C:\\Windows\\win.ini",
  "a\u0000b",
  "\u0000",
  "x".repeat(70_000),
  "💥".repeat(5_000),
  "\u202e.txt",
  "con",
  "aux.txt",
  "-rf",
  "--help",
  "\n",
  "\r\n",
  "*",
  "**/*",
  "?",
  "[",
  "(?<",
  "\\",
  "proc/self/environ",
  "/proc/self/environ",
  "file:///etc/passwd",
  "http://169.254.169.254/",
  "null",
  "undefined",
  "NaN",
];
const HOSTILE_NUMBERS = [-1, 0, 1, -0, 2 ** 31, 2 ** 53, -(2 ** 53), 1e308, -1e308, 0.5, Number.MAX_SAFE_INTEGER + 2];

// Fields that carry a program to run get a harmless one: the fuzz judges the pipeline, not a shell.
const EXECUTABLE_FIELD = /^(command|argv|args|script|program|shell|cmd|interpreter|code|env)$/;

function stringArb(): fc.Arbitrary<string> {
  return fc.oneof(fc.constantFrom(...HOSTILE_STRINGS), fc.string({ maxLength: 40 }), fc.string({ unit: "binary", maxLength: 40 }));
}

function arbFor(schema: Schema | undefined, depth: number, project: string, key = ""): fc.Arbitrary<unknown> {
  const anyJson = fc.jsonValue({ maxDepth: 2 });
  if (schema === undefined || depth > 4) return anyJson;
  if (key === "project") return fc.oneof({ weight: 4, arbitrary: fc.constant(project) }, { weight: 1, arbitrary: stringArb() });
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  let valid: fc.Arbitrary<unknown>;
  if (schema.enum !== undefined && schema.enum.length > 0) valid = fc.constantFrom(...schema.enum);
  else if (type === "string") valid = stringArb();
  else if (type === "integer")
    valid = fc.oneof(fc.integer({ min: schema.minimum ?? -5, max: Math.min(schema.maximum ?? 1_000, 1_000) }), fc.constantFrom(...HOSTILE_NUMBERS));
  else if (type === "number") valid = fc.oneof(fc.double({ noNaN: true }), fc.constantFrom(...HOSTILE_NUMBERS));
  else if (type === "boolean") valid = fc.boolean();
  else if (type === "array") valid = fc.array(arbFor(schema.items, depth + 1, project), { maxLength: 4 });
  else if (type === "object" && schema.properties !== undefined) {
    const model: Record<string, fc.Arbitrary<unknown>> = {};
    for (const [name, prop] of Object.entries(schema.properties)) model[name] = arbFor(prop, depth + 1, project, name);
    valid = fc.record(model, { requiredKeys: (schema.required ?? []).filter((k) => k in model) });
  } else valid = anyJson;
  // Mostly schema-shaped values; sometimes a wrong shape.
  return fc.oneof({ weight: 6, arbitrary: valid }, { weight: 1, arbitrary: anyJson });
}

/** Tool arguments are a JSON object on the wire (MCP); inside it, anything goes. */
function argumentsArb(schema: Schema, project: string): fc.Arbitrary<Record<string, unknown>> {
  const shaped = arbFor({ ...schema, type: "object" }, 0, project).filter(
    (v): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v),
  );
  return fc.oneof(
    { weight: 6, arbitrary: shaped },
    { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 }) },
  );
}

function harmless(args: unknown): unknown {
  if (args === null || typeof args !== "object" || Array.isArray(args)) return args;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(args)) {
    out[k] = EXECUTABLE_FIELD.test(k) ? (Array.isArray(v) ? ["true"] : typeof v === "string" ? "true" : v) : harmless(v);
  }
  return out;
}

/** Every entry below dir with its size and mtime (to see any write outside the project). */
function tree(dir: string, out: Record<string, string> = {}): Record<string, string> {
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    const info = statSync(full);
    out[full] = `${info.isDirectory() ? "d" : info.size}:${info.isDirectory() ? "" : info.mtimeMs}`;
    if (info.isDirectory() && !full.endsWith("/fuzz")) tree(full, out);
  }
  return out;
}

describe("fuzzing every admitted tool's input through the gateway pipeline", () => {
  let dev: DevProject;
  let outsideRoot: string;
  before(async () => {
    dev = await openDevProject(
      { "src/a.ts": "export const a = 1;\n", "README.md": "# fuzz\n" },
      {
        name: "fuzz",
        prepare: (projectDir) => {
          mkdirSync(join(dirname(projectDir), "outside"), { recursive: true });
          writeFileSync(join(dirname(projectDir), "outside", "outside.txt"), "sentinel\n");
        },
      },
    );
    outsideRoot = dirname(dev.projectDir);
  });
  after(async () => dev?.close());

  it(
    `${cases} cases: every call answers, every failure is structured, nothing is written outside the project`,
    { timeout: Math.max(110_000, cases * 200) },
    async () => {
      const outsideBefore = tree(outsideRoot);
      const tools = toolDefinitions().filter((t) => t.implemented !== false);
      const perTool = new Map<string, { calls: number; failures: number; ms: number }>();
      const listed = await connectMcp(dev.server.mcpUrl, dev.server.token).then(async (c) => {
        const names = new Set((await c.listTools()).tools.map((t) => t.name));
        await c.close();
        return names;
      });
      let failures = 0;
      let done = 0;
      const runStarted = performance.now();
      const problems: string[] = [];
      const seed = Number(process.env["WEBCODEX_FAULTS_SEED"] ?? Date.now() % 100_000);
      const figures = (complete: boolean) => ({
        cases_planned: cases,
        cases: done,
        run_complete: complete,
        streams,
        seed,
        tools: tools.length,
        tool_failures_structured: failures,
        property_failures: problems.length,
        seconds: Math.round((performance.now() - runStarted) / 1000),
        per_tool: Object.fromEntries([...perTool].map(([k, v]) => [k, { ...v, ms: Math.round(v.ms) }])),
      });
      const caseArb = fc
        .constantFrom(...tools)
        .chain((tool) =>
          argumentsArb(tool.inputSchema as Schema, dev.project).map((args) => ({ tool, args: tool.effect === "process_execution" ? harmless(args) : args })),
        );
      // `streams` property runs side by side (own client and seed each, the cases split between
      // them) keep the client and the server busy at once; each is the same property.
      const runStream = async (index: number): Promise<void> => {
        let client: Client = await connectMcp(dev.server.mcpUrl, dev.server.token);
        let own = 0;
        await fc.assert(
          fc.asyncProperty(caseArb, async ({ tool, args }) => {
            const direct = listed.has(tool.name);
            const name = direct ? tool.name : "call_runtime_tool";
            const callArgs = direct ? args : { tool: tool.name, arguments: args };
            const counts = perTool.get(tool.name) ?? { calls: 0, failures: 0, ms: 0 };
            counts.calls++;
            perTool.set(tool.name, counts);
            if (++done % 1000 === 0 && verbose)
              console.log(
                `${done} cases ${Math.round(performance.now() - runStarted)} ms, rss ${Math.round(process.memoryUsage().rss / 2 ** 20)} MiB, heap ${Math.round(process.memoryUsage().heapUsed / 2 ** 20)} MiB`,
              );
            if (done % 10_000 === 0) await recordFigures("fuzz", figures(false));
            // A fresh MCP session every CLIENT_CASES cases, as a long-running Host reconnects: the
            // SDK's client transport hangs every request's abort listener on one signal for its
            // whole life, which grows without bound over 100,000 calls.
            if (++own % CLIENT_CASES === 0) {
              const old = client;
              client = await connectMcp(dev.server.mcpUrl, dev.server.token);
              await (old.transport as StreamableHTTPClientTransport | undefined)?.terminateSession();
              await old.close();
            }
            // A thrown error here (HTTP 5xx, broken session, protocol error) fails the property.
            let res: Awaited<ReturnType<Client["callTool"]>>;
            const callStarted = performance.now();
            try {
              res = await client.callTool({ name, arguments: callArgs as Record<string, unknown> });
              counts.ms += performance.now() - callStarted;
            } catch (error) {
              throw new Error(`${tool.name}: the call did not answer: ${String(error)}`);
            }
            if (res.isError === true) {
              failures++;
              counts.failures++;
              const content = (res.structuredContent ?? {}) as Record<string, unknown>;
              const structured = typeof content["reason_code"] === "string" && typeof content["failure_stage"] === "string";
              if (!structured) problems.push(`${tool.name}: unstructured failure ${JSON.stringify(res).slice(0, 300)}`);
              assert.ok(structured, `${tool.name}: a failure without reason_code/failure_stage: ${JSON.stringify(res).slice(0, 300)}`);
            }
          }),
          { numRuns: Math.floor(cases / streams) + (index < cases % streams ? 1 : 0), seed: seed + index, endOnFailure: true },
        );
        await client.close();
      };
      try {
        await Promise.all(Array.from({ length: streams }, (_, i) => runStream(i)));
      } finally {
        await recordFigures("fuzz", { ...figures(false), problems: problems.slice(0, 10) });
      }
      assert.deepEqual(tree(outsideRoot), outsideBefore, "nothing outside the project changed");
      if (verbose) {
        const stat = readFileSync(`/proc/${dev.server.child.pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
        console.log(
          `cpu: test ${Math.round((process.cpuUsage().user + process.cpuUsage().system) / 1000)} ms, server ${(Number(stat[11]) + Number(stat[12])) * 10} ms`,
        );
      }
      await recordFigures("fuzz", figures(true));
    },
  );
});
