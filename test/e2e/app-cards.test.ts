/**
 * The MCP App cards in a real browser: `webcodex dev` as a process, a test Host page (an MCP
 * client that declares the Apps extension, AppBridge, a sandboxed iframe per card) driven by
 * headless Debian chromium through playwright-core. What a person sees is asserted as DOM
 * text, and each card is saved as a screenshot (into docs/images/cards/ when
 * WEBCODEX_WRITE_DOC_IMAGES=1, else into the test's output dir).
 *
 * One concept over 400 lines: the MCP App cards in one browser session, one card per test.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer, request } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { chromium } from "playwright-core";
import type { BrowserContext, Page } from "playwright-core";
import { createPgliteDatabase } from "@webcodex/platform";
import { TOOLS_LIST_MAX_BYTES } from "@webcodex/contracts";
import { callTool, openDevProject, quietWindow, tempDir, until } from "../support/index.js";
import type { DevProject } from "../support/index.js";

const repo = fileURLToPath(new URL("../../../", import.meta.url));
const CHROMIUM = "/usr/bin/chromium";
const imagesDir = process.env["WEBCODEX_WRITE_DOC_IMAGES"] === "1" ? join(repo, "docs/images/cards") : tempDir("wcx-card-shots-");
/** Quote- and markup-laden names: rendered as text they are harmless; parsed as HTML they would run. */
const NASTY_FILE = `"'><img src=x onerror=parent.postMessage('xss','*')>.txt`;
const NASTY_TITLE = `<script>parent.postMessage('xss','*')</script> "quoted" & 'single'`;

type Json = Record<string, unknown>;
type HostCall = { isError: boolean; result: Json; text: string };

/** Serves the host page and its bundle, and forwards /mcp to webcodex dev (same origin for the page). */
async function startHostServer(mcpUrl: string): Promise<{ server: Server; url: string }> {
  const bundle = await build({
    entryPoints: [join(repo, "test/app-host/host.mjs")],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    target: "es2022",
    logLevel: "warning",
  });
  const js = bundle.outputFiles[0]?.text ?? "";
  const target = new URL(mcpUrl);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.url === "/")
      return void res
        .writeHead(200, { "content-type": "text/html" })
        .end(`<!doctype html><html><head><title>host</title></head><body><h1>Test Host</h1><script type="module" src="/host.js"></script></body></html>`);
    if (req.url === "/host.js") return void res.writeHead(200, { "content-type": "text/javascript" }).end(js);
    if (req.url !== "/mcp") return void res.writeHead(404).end();
    // A Host's backend calls the server; the browser's Origin stays here.
    const { origin: _o, host: _h, ...headers } = req.headers;
    const upstream = request(
      { host: target.hostname, port: target.port, path: target.pathname, method: req.method, headers: { ...headers, host: target.host } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on("error", () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address();
  return { server, url: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/` };
}

describe("MCP App cards in headless chromium through a test Host with AppBridge", () => {
  let dev: DevProject;
  let host: { server: Server; url: string };
  let context: BrowserContext;
  let page: Page;
  let appTools: Array<{ name: string; meta: Json | null }>;
  let appToolsBytes = 0;
  const xssSignals: string[] = [];
  /** The continued Job, the uncertain one and the continued Agent, whose audit rows the last test reads. */
  let continuedJobId = "";
  let uncertainJobId = "";
  let continuedAgentId = "";
  let stopped = false;

  const call = (name: string, args: Json) =>
    page.evaluate(([n, a]) => (globalThis as never as { host: { callTool(n: string, a: Json): Promise<HostCall> } }).host.callTool(n, a), [
      name,
      args,
    ] as const);
  const present = (name: string, args: Json, slot: string) =>
    page.evaluate(
      ([n, a, s]) =>
        (
          globalThis as never as { host: { present(n: string, a: Json, s: string): Promise<HostCall & { mimeType: string; uiMeta: Json | null }> } }
        ).host.present(n, a, s),
      [name, args, slot] as const,
    );
  const messages = () =>
    page.evaluate(() => (globalThis as never as { host: { messages: Array<{ role: string; content: Array<{ type: string; text: string }> }> } }).host.messages);
  const card = (slot: string) => page.frameLocator(`iframe#${slot}`);
  const shot = async (slot: string, file: string) => {
    mkdirSync(imagesDir, { recursive: true });
    writeFileSync(join(imagesDir, file), await page.locator(`iframe#${slot}`).screenshot());
  };

  before(async () => {
    dev = await openDevProject(
      {
        "README.md": "# cards\n",
        "src/app.ts": "export const a = 1;\n",
        // A validator project_validate finds: node --test with one passing and one failing test.
        "package.json": JSON.stringify({ name: "cards", private: true, scripts: { test: "node --test" } }),
        "app.test.mjs":
          "import test from 'node:test';\nimport assert from 'node:assert';\ntest('adds', () => assert.equal(1 + 1, 2));\ntest('breaks', () => assert.equal(1, 2));\n",
      },
      { name: "cards" },
    );
    // Uncommitted work for the review facts: one modified file and two new ones.
    writeFileSync(join(dev.projectDir, "src/app.ts"), "export const a = 2;\nexport const b = 3;\n");
    writeFileSync(join(dev.projectDir, "notes.md"), "one\ntwo\n");
    writeFileSync(join(dev.projectDir, NASTY_FILE), "x\n");
    host = await startHostServer(dev.server.mcpUrl);
    context = await chromium.launchPersistentContext(tempDir("wcx-chromium-"), {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
      viewport: { width: 640, height: 900 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on("console", (m) => {
      if (m.text().includes("xss")) xssSignals.push(m.text());
      if (process.env["CARDS_DEBUG"]) process.stderr.write(`console: ${m.text()}\n`);
    });
    await page.exposeFunction("reportXss", (s: string) => xssSignals.push(s));
    await page.goto(host.url);
    await page.waitForFunction(() => (globalThis as never as { document: { title: string } }).document.title === "host ready");
    // Any card that ran injected markup would post "xss" to its parent.
    await page.evaluate(() => {
      const w = globalThis as never as { addEventListener(type: string, fn: (e: { data: unknown }) => void): void; reportXss(s: string): void };
      w.addEventListener("message", (e) => {
        if (e.data === "xss") w.reportXss("xss");
      });
    });
    const connected = await page.evaluate(
      (token) =>
        (globalThis as never as { host: { connect(t: string): Promise<{ tools: Array<{ name: string; meta: Json | null }>; bytes: number }> } }).host.connect(
          token,
        ),
      dev.server.token,
    );
    appTools = connected.tools;
    appToolsBytes = connected.bytes;
  });
  after(async () => {
    await context?.close();
    host?.server.close();
    if (!stopped) await dev?.close();
  });

  it("an App Host sees the card tools with _meta.ui.resourceUri, app-only helpers marked for the app, and the ui:// resources with a CSP allowing no origin", async (t) => {
    t.diagnostic(`tools/list for this App Host: ${appToolsBytes} bytes, ${appTools.length} tools`);
    const byName = new Map(appTools.map((x) => [x.name, x.meta]));
    for (const name of ["present_agent_continuation", "present_job_terminal_continuation", "present_work_result", "present_goal_plan"]) {
      assert.match(String((byName.get(name)?.["ui"] as Json | undefined)?.["resourceUri"]), /^ui:\/\/webcodex\/.+\.html$/, name);
    }
    for (const name of ["read_job_continuation", "update_job_continuation", "read_agent_continuation", "update_agent_continuation"])
      assert.deepEqual((byName.get(name)?.["ui"] as Json | undefined)?.["visibility"], ["app"], name);
    const modelTools = await page.evaluate(() => (globalThis as never as { host: { modelToolNames(): string[] } }).host.modelToolNames());
    for (const helper of ["read_job_continuation", "update_job_continuation", "read_agent_continuation", "update_agent_continuation"])
      assert.ok(!modelTools.includes(helper), helper);
    assert.ok(modelTools.includes("present_work_result"));
    const resources = await page.evaluate(() => (globalThis as never as { host: { listResources(): Promise<Json[]> } }).host.listResources());
    assert.deepEqual(resources.map((r) => r["uri"]).sort(), [
      "ui://webcodex/agent-continuation.html",
      "ui://webcodex/goal-plan.html",
      "ui://webcodex/job-continuation.html",
      "ui://webcodex/work-result.html",
    ]);
    for (const uri of resources.map((r) => String(r["uri"]))) {
      const [content] = await page.evaluate((u) => (globalThis as never as { host: { readResource(u: string): Promise<Json[]> } }).host.readResource(u), uri);
      assert.equal(content?.["mimeType"], "text/html;profile=mcp-app", uri);
      assert.deepEqual(
        ((content?.["_meta"] as Json)["ui"] as Json)["csp"],
        { connectDomains: [], resourceDomains: [], frameDomains: [], baseUriDomains: [] },
        uri,
      );
      const html = String(content?.["text"]);
      const csp = /http-equiv="Content-Security-Policy" content="([^"]+)"/.exec(html)?.[1] ?? "";
      assert.match(csp, /default-src 'none'/, uri);
      assert.match(csp, /script-src 'sha256-[A-Za-z0-9+/=]+'(;|$)/, `${uri}: scripts only by hash, no remote or inline-by-default script`);
      assert.match(csp, /connect-src 'none'/, uri);
      assert.ok(!/<script[^>]+src=/.test(html) && !/<link[^>]+href=/.test(html), `${uri}: no script or stylesheet is loaded from anywhere`);
      assert.equal(html.match(/<script>/g)?.length, 1, `${uri}: one inline script, the bundled card`);
    }
  });

  it("present_job_terminal_continuation on a sleep 2 Job: the card shows running, the Host gets exactly one ui/message after the Job ends, and its follow-up run unchanged returns the Job's output", async () => {
    const started = await call("run_shell", { project: dev.project, command: "sleep 2; echo card-job-output", wait_ms: 0 });
    assert.equal(started.result["execution_state"], "pending");
    const jobId = String(started.result["job_id"]);
    continuedJobId = jobId;
    const presented = await present("present_job_terminal_continuation", { project: dev.project, job_id: jobId }, "job");
    assert.equal(presented.isError, false, JSON.stringify(presented.result));
    assert.equal(presented.result["state"], "running");
    assert.equal((presented.result["continuation"] as Json)["unattended_continuation"], "unknown");
    assert.match(presented.text, /End your turn now/);
    await card("job").getByTestId("state").filter({ hasText: "running" }).waitFor({ timeout: 10_000 });
    assert.equal((await messages()).length, 0, "no message while the Job runs");
    await shot("job", "job-continuation-running.png");

    await until("the card sent its ui/message", async () => (await messages()).length > 0, 20_000, 100).catch(async (e: unknown) => {
      throw new Error(`${String(e)}; the card shows: ${await card("job").locator("#card").textContent()}`);
    });
    await card("job").getByTestId("dispatch").filter({ hasText: "accepted" }).waitFor({ timeout: 10_000 });
    assert.equal(await card("job").getByTestId("state").textContent(), "completed");
    assert.equal(await card("job").getByTestId("fresh-turn").textContent(), "not observed", "an accepted dispatch is not a fresh turn");
    assert.equal(await card("job").getByTestId("consumed").textContent(), "no");
    await shot("job", "job-continuation-dispatched.png");
    await quietWindow(2_500, "the card polls no more and never re-sends: over two of its 1 s poll intervals, nothing else arrives");
    const sent = await messages();
    assert.equal(sent.length, 1, "exactly one ui/message");
    assert.equal(sent[0]?.role, "user");
    const text = sent[0]?.content[0]?.text ?? "";
    const followUp = JSON.parse(text.slice(text.lastIndexOf("\n") + 1)) as { tool: string; arguments: Json };
    // The exact Gateway wrapper call (wait_for_job_terminal is a Gateway tool), as the tool result announced it.
    assert.deepEqual(followUp, { tool: "call_runtime_tool", arguments: { tool: "wait_for_job_terminal", arguments: { project: dev.project, job_id: jobId } } });
    const announced = (presented.result["continuation"] as Json)["follow_up"] as Json;
    assert.deepEqual({ tool: announced["tool"], arguments: announced["arguments"] }, followUp);
    const record0 = await call("read_job_continuation", { project: dev.project, job_id: jobId });
    assert.deepEqual(
      [
        (record0.result["continuation"] as Json)["dispatch"],
        (record0.result["continuation"] as Json)["fresh_turn"],
        (record0.result["continuation"] as Json)["consumed"],
      ],
      ["accepted", "not_observed", false],
      "dispatch alone is neither a fresh turn nor a consume",
    );

    // The Host's fresh turn runs the follow-up exactly as the card sent it.
    const consumed = await call(followUp.tool, followUp.arguments);
    assert.equal(consumed.isError, false, JSON.stringify(consumed.result));
    assert.match(JSON.stringify(consumed.result), /card-job-output/);

    const record = await call("read_job_continuation", { project: dev.project, job_id: jobId });
    const c = record.result["continuation"] as Json;
    assert.deepEqual([c["dispatch"], c["fresh_turn"], c["consumed"]], ["accepted", "observed", true]);
    // A second claim is refused: an answered dispatch is never sent again.
    const again = await call("update_job_continuation", { project: dev.project, job_id: jobId, step: "claim" });
    assert.equal(again.isError, true);
    assert.equal(again.result["detail_code"], "dispatch_already_claimed");
    // The model cannot reach the card helpers through the gateway.
    const viaGateway = await call("call_runtime_tool", { tool: "read_job_continuation", arguments: { project: dev.project, job_id: jobId } });
    assert.deepEqual(
      [viaGateway.isError, viaGateway.result["reason_code"], viaGateway.result["detail_code"]],
      [true, "presentation_tool_not_callable", "app_only"],
    );
  });

  it("a dispatch the Host fails is recorded as uncertain and never sent again, not even by a remounted card", async () => {
    const setFail = (on: boolean) =>
      page.evaluate((v) => {
        (globalThis as never as { host: { failMessages: boolean } }).host.failMessages = v;
      }, on);
    await setFail(true);
    const before = (await messages()).length;
    const started = await call("run_shell", { project: dev.project, command: "sleep 1; echo second-job", wait_ms: 0 });
    const jobId = String(started.result["job_id"]);
    uncertainJobId = jobId;
    await present("present_job_terminal_continuation", { project: dev.project, job_id: jobId }, "job_uncertain");
    await card("job_uncertain").getByTestId("dispatch").filter({ hasText: "uncertain" }).waitFor({ timeout: 20_000 });
    assert.equal((await messages()).length, before + 1);
    await setFail(false);
    const again = await present("present_job_terminal_continuation", { project: dev.project, job_id: jobId }, "job_remounted");
    assert.equal((again.result["continuation"] as Json)["dispatch"], "uncertain");
    await card("job_remounted").getByTestId("dispatch").filter({ hasText: "uncertain" }).waitFor({ timeout: 10_000 });
    await quietWindow(2_000, "nothing is re-sent, by either card, over two of their 1 s poll intervals");
    assert.equal((await messages()).length, before + 1, "no second ui/message");
    const record = await call("read_job_continuation", { project: dev.project, job_id: jobId });
    assert.deepEqual([(record.result["continuation"] as Json)["fresh_turn"], (record.result["continuation"] as Json)["consumed"]], ["not_observed", false]);
  });

  it("present_agent_continuation: the card shows the Agent's pending events live, sends exactly one ui/message once an event arrives, and its call_runtime_tool follow-up run unchanged returns that event", async () => {
    const created = await call("call_runtime_tool", { tool: "create_agent", arguments: { name: "card-lead" } });
    assert.equal(created.isError, false, JSON.stringify(created.result));
    const agentId = String(created.result["agent_id"]);
    continuedAgentId = agentId;
    const before = (await messages()).length;
    const presented = await present("present_agent_continuation", { agent_continuation_ref: created.result["agent_continuation_ref"] }, "agent");
    assert.equal(presented.isError, false, JSON.stringify(presented.result));
    assert.deepEqual([presented.result["agent_id"], presented.result["pending_count"], presented.result["after_cursor"]], [agentId, 0, "0"]);
    const c0 = presented.result["continuation"] as Json;
    assert.deepEqual([c0["dispatch"], c0["fresh_turn"], c0["consumed"], c0["unattended_continuation"]], ["none", "not_observed", false, "unknown"]);
    // The carried call is the Gateway wrapper, exactly as a Host runs it.
    assert.deepEqual(c0["follow_up"], {
      follow_up_kind: "mechanically_followable",
      tool: "call_runtime_tool",
      arguments: { tool: "wait_for_agent_events", arguments: { agent_id: agentId, after_cursor: "0" } },
    });
    assert.match(presented.text, /End your turn now/);
    await card("agent").getByTestId("pending-count").filter({ hasText: "0" }).waitFor({ timeout: 10_000 });
    assert.equal((await messages()).length, before, "no message while nothing is pending");

    // Work for this Agent arrives: a Task assigned to it appends task_assigned to its log.
    const task = await call("call_runtime_tool", {
      tool: "create_agent_task",
      arguments: {
        project: dev.project,
        title: "Review <b>the</b> parser",
        instructions: "Look at src/app.ts.",
        assignee_agent_id: agentId,
        idempotency_key: "card-task-1",
      },
    });
    assert.equal(task.isError, false, JSON.stringify(task.result));
    await until("the agent card sent its ui/message", async () => (await messages()).length > before, 20_000, 100).catch(async (e: unknown) => {
      throw new Error(`${String(e)}; the card shows: ${await card("agent").locator("#card").textContent()}`);
    });
    await card("agent").getByTestId("dispatch").filter({ hasText: "accepted" }).waitFor({ timeout: 10_000 });
    assert.equal(await card("agent").getByTestId("pending-count").textContent(), "1");
    assert.deepEqual(await card("agent").locator(".event").allTextContents(), [`task_assigned ${String(task.result["task_id"])}`]);
    assert.equal(await card("agent").getByTestId("fresh-turn").textContent(), "not observed", "an accepted dispatch is not a fresh turn");
    assert.equal(await card("agent").getByTestId("consumed").textContent(), "no");
    await shot("agent", "agent-continuation-dispatched.png");
    await quietWindow(2_500, "the agent card never re-sends: over two of its 1 s poll intervals, nothing else arrives");
    const sent = (await messages()).slice(before);
    assert.equal(sent.length, 1, "exactly one ui/message");
    const text = sent[0]?.content[0]?.text ?? "";
    const followUp = JSON.parse(text.slice(text.lastIndexOf("\n") + 1)) as { tool: string; arguments: Json };
    assert.deepEqual(followUp, {
      tool: "call_runtime_tool",
      arguments: { tool: "wait_for_agent_events", arguments: { agent_id: agentId, after_cursor: "0" } },
    });
    const dispatched = await call("read_agent_continuation", {
      agent_id: agentId,
      endpoint_id: presented.result["endpoint_id"],
      expected_controller_generation: presented.result["controller_generation"],
      after_cursor: "0",
    });
    assert.deepEqual(
      [(dispatched.result["continuation"] as Json)["fresh_turn"], (dispatched.result["continuation"] as Json)["consumed"]],
      ["not_observed", false],
    );

    // The Host's fresh turn runs the follow-up exactly as the card sent it.
    const consumed = await call(followUp.tool, followUp.arguments);
    assert.equal(consumed.isError, false, JSON.stringify(consumed.result));
    assert.deepEqual(
      (consumed.result["events"] as Json[]).map((e) => [e["kind"], e["task_id"]]),
      [["task_assigned", task.result["task_id"]]],
    );

    const target = {
      agent_id: agentId,
      endpoint_id: presented.result["endpoint_id"],
      expected_controller_generation: presented.result["controller_generation"],
      after_cursor: "0",
    };
    const record = await call("read_agent_continuation", target);
    const c = record.result["continuation"] as Json;
    assert.deepEqual([c["dispatch"], c["fresh_turn"], c["consumed"]], ["accepted", "observed", true]);
    // A second claim is refused: an answered dispatch is never sent again.
    const again = await call("update_agent_continuation", { ...target, step: "claim" });
    assert.deepEqual([again.isError, again.result["detail_code"]], [true, "dispatch_already_claimed"]);
    // The model cannot reach the card helpers through the gateway, nor present through it.
    const viaGateway = await call("call_runtime_tool", { tool: "read_agent_continuation", arguments: target });
    assert.deepEqual(
      [viaGateway.isError, viaGateway.result["reason_code"], viaGateway.result["detail_code"]],
      [true, "presentation_tool_not_callable", "app_only"],
    );
    // A later card starts after the delivered events: nothing pending, nothing dispatched.
    const next = await call("present_agent_continuation", {
      agent_id: agentId,
      endpoint_id: presented.result["endpoint_id"],
      expected_controller_generation: presented.result["controller_generation"],
    });
    assert.equal(next.isError, false, JSON.stringify(next.result));
    assert.deepEqual([next.result["after_cursor"], next.result["pending_count"], (next.result["continuation"] as Json)["dispatch"]], ["1", 0, "none"]);
  });

  it("present_work_result shows the summary, changed files with +/- counts, the latest validation result and pending Jobs, all as text: markup in names and titles never runs", async () => {
    const session = await call("create_session", { project: dev.project, title: "cards" });
    const validated = await call("call_runtime_tool", {
      tool: "project_validate",
      arguments: { project: dev.project, session_id: session.result["session_ref"], wait_ms: 30_000 },
    });
    assert.equal(validated.result["status"], "failed", JSON.stringify(validated.result));
    const detached = await call("run_detached_process", { project: dev.project, args: ["sleep", "30"] });
    const presented = await present(
      "present_work_result",
      { project: dev.project, title: NASTY_TITLE, summary: "Bumped a, added b and notes.", session_id: session.result["session_ref"] },
      "work",
    );
    assert.equal(presented.isError, false, JSON.stringify(presented.result));
    const files = presented.result["changed_files"] as Json[];
    assert.deepEqual(
      files.find((f) => f["path"] === "src/app.ts"),
      { path: "src/app.ts", status: "modified", added_lines: 2, removed_lines: 1 },
    );
    assert.ok(files.some((f) => f["path"] === NASTY_FILE));
    assert.ok((presented.result["pending_jobs"] as Json[]).some((j) => j["job_id"] === detached.result["job_id"]));
    const { at, ...latest } = presented.result["latest_validation"] as Json;
    assert.deepEqual(latest, {
      tool: "project_validate",
      status: "failed",
      tests: { passed: 1, failed: 1, skipped: 0 },
      session_id: session.result["session_id"],
    });
    assert.ok(Date.parse(String(at)) > Date.now() - 120_000);
    // A Host without a renderer gets the same facts as text.
    assert.match(presented.text, /src\/app\.ts \(modified, \+2 -1\)/);
    assert.match(presented.text, /Latest validation: failed \(project_validate\): tests 1 passed, 1 failed, 0 skipped/);
    const work = card("work");
    await work.getByTestId("title").waitFor({ timeout: 10_000 });
    assert.equal(await work.getByTestId("title").textContent(), NASTY_TITLE);
    assert.equal(await work.getByTestId("summary").textContent(), "Bumped a, added b and notes.");
    const paths = await work.getByTestId("file-path").allTextContents();
    assert.ok(paths.includes("src/app.ts") && paths.includes(NASTY_FILE), paths.join(" | "));
    assert.match((await work.locator("#card").textContent()) ?? "", /src\/app\.ts modified \+2 -1/);
    assert.match((await work.getByTestId("jobs").textContent()) ?? "", new RegExp(`${String(detached.result["job_id"])}: running`));
    assert.equal(await work.getByTestId("validation-status").textContent(), "failed");
    assert.equal(await work.getByTestId("validation-counts").textContent(), "tests 1 passed, 1 failed, 0 skipped");
    assert.equal(await work.locator("img").count(), 0, "the file name's <img> is text, not an element");
    assert.equal(await work.locator("#card script").count(), 0, "the title's <script> is text, not an element");
    await quietWindow(300, "an injected onerror or script would have posted its signal by now");
    assert.deepEqual(xssSignals, [], "no injected script ran");
    await shot("work", "work-result.png");
  });

  it("present_goal_plan shows the goal and steps with states; presenting the same goal again updates the same plan with a new revision", async () => {
    const steps = [
      { title: "Reproduce the bug", state: "completed" },
      { title: "Fix the parser", state: "in_progress" },
      { title: "Add a regression test", state: "pending" },
    ];
    const first = await call("present_goal_plan", { project: dev.project, goal: "Fix the CSV parser", steps });
    assert.equal(first.result["revision"], 1);
    const second = await present(
      "present_goal_plan",
      { project: dev.project, goal: "Fix the CSV parser", steps: steps.map((s, i) => (i === 1 ? { ...s, state: "completed" } : s)) },
      "plan",
    );
    assert.equal(second.result["plan_id"], first.result["plan_id"]);
    assert.equal(second.result["revision"], 2);
    assert.match(second.text, /2\. \[completed\] Fix the parser/);
    const plan = card("plan");
    await plan.getByTestId("revision").filter({ hasText: "revision 2" }).waitFor({ timeout: 10_000 });
    assert.equal(await plan.getByTestId("goal").textContent(), "Fix the CSV parser");
    assert.deepEqual(await plan.locator(".step").allTextContents(), [
      "completed Reproduce the bug",
      "completed Fix the parser",
      "pending Add a regression test",
    ]);
    await shot("plan", "goal-plan.png");
  });

  it("a Host without the extension gets no card resources, no _meta.ui and no app-only tools; present_* called by name still return the facts", async () => {
    const client = dev.client;
    const listed = (await client.listTools()).tools;
    assert.ok(Buffer.byteLength(JSON.stringify({ tools: listed })) <= TOOLS_LIST_MAX_BYTES);
    assert.ok(
      listed.every((x) => x._meta === undefined && !x.name.startsWith("present_")),
      listed.map((x) => x.name).join(","),
    );
    assert.ok(
      !listed.some((x) => ["read_job_continuation", "update_job_continuation", "read_agent_continuation", "update_agent_continuation"].includes(x.name)),
    );
    assert.deepEqual((await client.listResources()).resources, []);
    await assert.rejects(client.readResource({ uri: "ui://webcodex/job-continuation.html" }), /Resource not found/);
    const refused = await callTool(client, "read_job_continuation", { project: dev.project, job_id: "job_1" });
    assert.equal(refused.isError, true);
    assert.equal(refused.result["reason_code"], "tool_not_admitted");
    const refusedAgent = await callTool(client, "update_agent_continuation", {
      agent_id: continuedAgentId,
      endpoint_id: "wc_ep_x",
      expected_controller_generation: 1,
      after_cursor: "0",
      step: "claim",
    });
    assert.deepEqual([refusedAgent.isError, refusedAgent.result["reason_code"]], [true, "tool_not_admitted"]);
    // Without a renderer the same facts arrive as structured content and text.
    const res = await client.callTool({ name: "present_work_result", arguments: { project: dev.project, title: "Done", summary: "Bumped a." } });
    assert.notEqual(res.isError, true);
    const facts = res.structuredContent as Json;
    assert.deepEqual(
      (facts["changed_files"] as Json[]).find((f) => f["path"] === "src/app.ts"),
      { path: "src/app.ts", status: "modified", added_lines: 2, removed_lines: 1 },
    );
    const text = (res.content as Array<{ type: string; text: string }>)[0]?.text ?? "";
    assert.match(text, /^Done\nBumped a\.\nChanged files:\n/);
    assert.match(text, /src\/app\.ts \(modified, \+2 -1\)/);
    // Without session_id: the latest validation in any of the caller's Sessions on the Project.
    assert.deepEqual([(facts["latest_validation"] as Json)["tool"], (facts["latest_validation"] as Json)["status"]], ["project_validate", "failed"]);
    assert.match(text, /\nLatest validation: failed \(project_validate\)/);
    // A session_id that is not the caller's Session fails like any unknown selector.
    const badSession = await callTool(client, "present_work_result", { project: dev.project, title: "Done", summary: "x", session_id: "~s999" });
    assert.deepEqual([badSession.isError, badSession.result["detail_code"]], [true, "session_not_found"]);
    const plan = await callTool(client, "present_goal_plan", { goal: "Ship it", steps: [{ title: "Review", state: "pending" }] });
    assert.deepEqual([plan.isError, plan.result["revision"]], [false, 1]);
    // The continuation tools too: the Job's state and the continuation facts, as structured content and text.
    const job = await client.callTool({ name: "present_job_terminal_continuation", arguments: { project: dev.project, job_id: continuedJobId } });
    const jobFacts = job.structuredContent as Json;
    assert.deepEqual(
      [
        jobFacts["state"],
        jobFacts["exit_code"],
        (jobFacts["continuation"] as Json)["dispatch"],
        (jobFacts["continuation"] as Json)["fresh_turn"],
        (jobFacts["continuation"] as Json)["consumed"],
      ],
      ["completed", 0, "accepted", "observed", true],
    );
    assert.match((job.content as Array<{ text: string }>)[0]?.text ?? "", /^Job \S+ is completed \(exit 0\)\./);
    const agent = await client.callTool({
      name: "present_agent_continuation",
      arguments: { agent_id: continuedAgentId, endpoint_id: "wc_ep_unknown00000000000000000000000000", expected_controller_generation: 1 },
    });
    assert.equal(agent.isError, true, "an Endpoint that is not the caller's is refused");
    const created = await callTool(client, "call_runtime_tool", { tool: "create_agent", arguments: { name: "plain-host" } });
    const plain = await client.callTool({
      name: "present_agent_continuation",
      arguments: { agent_continuation_ref: created.result["agent_continuation_ref"] },
    });
    assert.deepEqual(
      [(plain.structuredContent as Json)["pending_count"], ((plain.structuredContent as Json)["continuation"] as Json)["dispatch"]],
      [0, "none"],
    );
    assert.match((plain.content as Array<{ text: string }>)[0]?.text ?? "", /0 pending event\(s\) after cursor 0\./);
  });

  it("the Job and Agent records' three facts are also in the audit: dispatch on the card helper's row, fresh turn and consume on the follow-up's row", async () => {
    await context.close();
    await dev.close();
    stopped = true;
    const db = await createPgliteDatabase(join(dev.dataDir, "postgres"));
    let rows: Array<{ tool: string; summary: { continuation?: Array<{ subject: string; id: string; fact: string }> } }>;
    try {
      rows = (
        await db.query<{ tool: string; summary: never }>(
          "SELECT tool, summary FROM audit.action_audit WHERE summary ? 'continuation' ORDER BY started_at, call_id",
        )
      ).rows;
    } finally {
      await db.close();
    }
    const factsOf = (subject: string, id: string) =>
      rows.flatMap((r) => (r.summary.continuation ?? []).filter((f) => f.subject === subject && f.id === id).map((f) => `${r.tool}:${f.fact}`));
    assert.deepEqual(factsOf("job", continuedJobId), [
      "update_job_continuation:dispatch_claimed",
      "update_job_continuation:dispatch_accepted",
      "wait_for_job_terminal:fresh_turn_observed",
      "wait_for_job_terminal:consumed",
    ]);
    assert.deepEqual(factsOf("job", uncertainJobId), ["update_job_continuation:dispatch_claimed", "update_job_continuation:dispatch_uncertain"]);
    assert.deepEqual(factsOf("agent", continuedAgentId), [
      "update_agent_continuation:dispatch_claimed",
      "update_agent_continuation:dispatch_accepted",
      "wait_for_agent_events:fresh_turn_observed",
      "wait_for_agent_events:consumed",
    ]);
  });
});
