import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import type { Logger } from "@webcodex/platform";
import { eventually, tempRoot } from "./exec.test-support.js";
import { pidGone, processGroupAlive } from "./process-probes.test-support.js";
import { createExecutor } from "./index.js";
import type { CompletedResult, FailedToStartResult, JobSnapshot } from "./index.js";
import { signalGroup } from "./process-group.js";
import { createSpawnHost, type SpawnHost } from "./spawn-host.js";
import { createDirectSpawner, type SpawnedChild, type SpawnOptions } from "./spawner.js";

interface Observed {
  events: string[];
  stdout: Buffer;
  stderr: Buffer;
  pidKnown: boolean;
}

/** Everything a caller can see of one child, up to "close". */
function observe(child: SpawnedChild, input?: Buffer): Promise<Observed> {
  return new Promise((resolve) => {
    const events: string[] = [];
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.on("spawn", () => events.push("spawn"));
    child.on("error", (error) => events.push(`error:${(error as NodeJS.ErrnoException).code}`));
    child.on("exit", (code, signal) => events.push(`exit:${code}:${signal}`));
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
    if (input !== undefined) {
      child.stdin?.on("error", () => {});
      child.stdin?.end(input);
    }
    child.on("close", (code, signal) => {
      events.push(`close:${code}:${signal}`);
      resolve({ events, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr), pidKnown: child.pid !== undefined });
    });
  });
}

const sha = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

function silentLogger(warnings: string[] = []): Logger {
  const logger: Logger = {
    debug: () => {},
    info: () => {},
    warn: (msg) => warnings.push(msg),
    error: () => {},
    child: () => logger,
  };
  return logger;
}

const HOST_MODULE = fileURLToPath(new URL("./spawn-host.js", import.meta.url));

/** Starts `node script` and resolves with its first stdout line. */
function startNode(script: string, args: string[]): { child: ReturnType<typeof spawn>; firstLine: Promise<string> } {
  const child = spawn(process.execPath, [script, ...args], { stdio: ["ignore", "pipe", "inherit"] });
  const firstLine = new Promise<string>((resolve) => {
    let text = "";
    child.stdout.on("data", (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes("\n")) resolve(text.slice(0, text.indexOf("\n")));
    });
  });
  return { child, firstLine };
}

describe("spawn host", () => {
  let root = "";
  let cleanup = async (): Promise<void> => {};
  let host: SpawnHost;
  const direct = createDirectSpawner();
  before(async () => {
    ({ root, cleanup } = await tempRoot());
    host = createSpawnHost({ logger: silentLogger() });
  });
  after(async () => {
    await host.close();
    await cleanup();
  });

  const cases: Array<[string, string, string[], Partial<SpawnOptions>]> = [
    ["binary stdout, stderr and an exit code", "sh", ["-c", "printf 'a\\000b\\377c'; printf 'oops' >&2; exit 7"], {}],
    ["megabytes of output on both streams", "sh", ["-c", "seq 1 400000; seq 1 50000 >&2"], { detached: true }],
    ["death by signal", "sh", ["-c", "echo before; kill -KILL $$"], { detached: true }],
    ["a missing program", "/nonexistent/program", [], {}],
    ["a file that is not executable", "/etc/hostname", [], {}],
    ["a missing working directory", "true", [], { cwd: "/nonexistent/dir" }],
  ];
  for (const [name, program, args, extra] of cases) {
    it(`matches a direct spawn: ${name}`, async () => {
      const options: SpawnOptions = { cwd: root, ...extra };
      const expected = await observe(direct.spawn(program, args, options));
      const actual = await observe(host.spawn(program, args, options));
      assert.deepEqual(actual.events, expected.events);
      assert.equal(sha(actual.stdout), sha(expected.stdout));
      assert.equal(sha(actual.stderr), sha(expected.stderr));
      assert.equal(actual.pidKnown, expected.pidKnown);
    });
  }

  it("delivers stdin, megabytes of it, and survives a child that stops reading", async () => {
    const input = Buffer.alloc(3 * 1024 * 1024, "0123456789abcdef");
    const whole = await observe(host.spawn("cat", [], { cwd: root, stdin: "pipe" }), input);
    assert.deepEqual(whole.events, ["spawn", "exit:0:null", "close:0:null"]);
    assert.equal(sha(whole.stdout), sha(input));
    const head = await observe(host.spawn("head", ["-c", "5"], { cwd: root, stdin: "pipe" }), input);
    assert.equal(head.stdout.toString(), "01234");
    assert.deepEqual(head.events, ["spawn", "exit:0:null", "close:0:null"]);
  });

  it("spawns from the host process, not from this one", async () => {
    const seen = await observe(host.spawn("sh", ["-c", "echo $PPID"], { cwd: root }));
    assert.equal(Number(seen.stdout.toString().trim()), host.hostPid);
    assert.notEqual(host.hostPid, process.pid);
  });

  it("a process-group kill of sh -c 'sleep 30 & sleep 30' leaves no process", async () => {
    const child = host.spawn("sh", ["-c", "sleep 30 & sleep 30"], { cwd: root, detached: true });
    const seen = observe(child);
    await new Promise<void>((resolve) => child.once("spawn", resolve));
    const pgid = child.pid ?? 0;
    assert.ok(pgid > 0);
    assert.ok(await eventually(() => processGroupAlive(pgid), 2_000));
    assert.equal(signalGroup(pgid, "SIGKILL"), true);
    assert.deepEqual((await seen).events, ["spawn", "exit:null:SIGKILL", "close:null:SIGKILL"]);
    assert.ok(await eventually(() => !processGroupAlive(pgid), 2_000), "a member of the group survived");
  });

  it("kill() signals the child by its pid", async () => {
    const child = host.spawn("sleep", ["30"], { cwd: root });
    const seen = observe(child);
    await new Promise<void>((resolve) => child.once("spawn", resolve));
    assert.equal(child.kill(), true);
    assert.deepEqual((await seen).events, ["spawn", "exit:null:SIGTERM", "close:null:SIGTERM"]);
    assert.equal(child.kill(), false);
  });
});

describe("spawn host failures", () => {
  let root = "";
  let cleanup = async (): Promise<void> => {};
  before(async () => {
    ({ root, cleanup } = await tempRoot());
  });
  after(async () => {
    await cleanup();
  });

  it("killing the host mid-run ends the job with an unknown exit, kills its group, and the next spawn works", async () => {
    const warnings: string[] = [];
    const host = createSpawnHost({ logger: silentLogger(warnings) });
    const executor = createExecutor({ root, spawner: host });
    try {
      const started = await executor.runShell({ command: "echo $$; sleep 30 & sleep 30", wait_ms: 0 });
      assert.equal(started.execution_state, "pending");
      let pgid = 0;
      assert.ok(
        await eventually(() => {
          const [observed] = executor.observeJobs({ job_ids: [started.job_id] }).jobs;
          pgid = Number((observed as JobSnapshot).stdout_tail.trim());
          return pgid > 0;
        }, 3_000),
      );
      const firstHost = host.hostPid ?? 0;
      assert.ok(firstHost > 0);
      assert.ok(processGroupAlive(pgid));

      process.kill(firstHost, "SIGKILL");
      const result = (await executor.waitForJobTerminal({ job_id: started.job_id, wait_ms: 5_000 })) as CompletedResult;
      assert.equal(result.execution_state, "completed");
      // Outcome unknown: neither an exit code nor a signal was observed, and the result says so.
      assert.equal(result.exit_code, null);
      assert.equal(result.signal, null);
      assert.equal(result.outcome_unknown, true);
      assert.equal(result.stdout, `${pgid}\n`);
      assert.ok(await eventually(() => !processGroupAlive(pgid), 3_000), "the job's processes outlived the host");
      assert.ok(warnings.some((w) => w.includes("spawn host died")));

      const next = (await executor.runProcess({ args: ["echo", "again"] })) as CompletedResult;
      assert.equal(next.stdout, "again\n");
      assert.equal(next.exit_code, 0);
      assert.ok(host.hostPid !== undefined && host.hostPid !== firstHost, "a new host serves the next spawn");
      assert.equal(host.fellBack, false);
    } finally {
      await executor.shutdown();
      await host.close();
    }
  });

  it("the children of a dead host are killed from this process: groups when detached, pids otherwise", async () => {
    const host = createSpawnHost({ logger: silentLogger() });
    try {
      const group = host.spawn("sh", ["-c", "sleep 30 & sleep 30"], { cwd: root, detached: true });
      const single = host.spawn("sleep", ["30"], { cwd: root });
      const seen = [observe(group), observe(single)];
      await Promise.all([group, single].map((child) => new Promise<void>((resolve) => child.once("spawn", resolve))));
      const pgid = group.pid ?? 0;
      const pid = single.pid ?? 0;
      assert.ok(await eventually(() => processGroupAlive(pgid), 2_000));
      process.kill(host.hostPid ?? 0, "SIGKILL");
      for (const observed of await Promise.all(seen)) {
        assert.deepEqual(observed.events, ["spawn", "exit:null:null", "close:null:null"]);
      }
      assert.ok(await eventually(() => !processGroupAlive(pgid) && pidGone(pid), 3_000), "a child of the dead host survived");
    } finally {
      await host.close();
    }
  });

  it("events the host sent before dying are still delivered, not replaced by an unknown exit", async () => {
    // A host that runs nothing: it reports a complete run, then exits at once.
    const module = path.join(root, "reports-then-dies.cjs");
    await writeFile(
      module,
      [
        'process.on("message", (m) => {',
        '  if (m.t !== "spawn") return;',
        '  process.send({ t: "spawn", id: m.id, pid: process.pid });',
        '  for (let i = 0; i < 64; i++) process.send({ t: "out", id: m.id, fd: 1, data: Buffer.alloc(65536, 120) });',
        '  process.send({ t: "out", id: m.id, fd: 1, data: Buffer.from("last words") });',
        '  process.send({ t: "exit", id: m.id, code: 5, signal: null });',
        '  process.send({ t: "close", id: m.id, code: 5, signal: null }, () => process.exit(0));',
        "});",
        'process.send({ t: "ready" });',
        "",
      ].join("\n"),
    );
    const host = createSpawnHost({ childModule: module, logger: silentLogger() });
    try {
      const seen = await observe(host.spawn("anything", [], { cwd: root }));
      assert.deepEqual(seen.events, ["spawn", "exit:5:null", "close:5:null"]);
      assert.equal(seen.stdout.length, 64 * 65536 + 10);
      assert.equal(seen.stdout.subarray(-10).toString(), "last words");
    } finally {
      await host.close();
    }
  });

  it("a spawn the host never confirmed ends as a start failure whose outcome is unknown", async () => {
    // A host that accepts, then dies on the first spawn request before answering.
    const module = path.join(root, "dies-on-spawn.cjs");
    await writeFile(module, 'process.on("message", () => process.exit(1)); process.send({ t: "ready" });\n');
    const host = createSpawnHost({ childModule: module, logger: silentLogger() });
    const executor = createExecutor({ root, spawner: host });
    try {
      const result = (await executor.runProcess({ args: ["echo", "never"] })) as FailedToStartResult;
      assert.equal(result.execution_state, "failed_to_start");
      assert.equal(result.error_code, "spawn_failed");
      assert.equal(result.outcome_unknown, true, "the host may have started it before dying");
    } finally {
      await executor.shutdown();
      await host.close();
    }
  });

  for (const [name, source] of [
    ["exits at once", "process.exit(3);\n"],
    ["never becomes ready", 'setInterval(() => {}, 1000); process.on("disconnect", () => process.exit(0));\n'],
  ] as const) {
    it(`falls back to spawning directly, with a warning, when the host ${name}`, async () => {
      const module = path.join(root, `host-${name.replace(/\W/g, "-")}.cjs`);
      await writeFile(module, source);
      const warnings: string[] = [];
      const host = createSpawnHost({ childModule: module, readyTimeoutMs: 300, logger: silentLogger(warnings) });
      try {
        // Requested while the host was still starting: served directly, stdin included.
        const first = await observe(host.spawn("cat", [], { cwd: root, stdin: "pipe" }), Buffer.from("queued input"));
        assert.equal(first.stdout.toString(), "queued input");
        assert.deepEqual(first.events, ["spawn", "exit:0:null", "close:0:null"]);
        assert.equal(host.fellBack, true);
        assert.ok(warnings.some((w) => w.includes("could not be started")));
        const later = await observe(host.spawn("sh", ["-c", "echo $PPID"], { cwd: root }));
        assert.equal(Number(later.stdout.toString().trim()), process.pid);
      } finally {
        await host.close();
      }
    });
  }
});

describe("spawn host lifetime", () => {
  let root = "";
  let cleanup = async (): Promise<void> => {};
  let script = "";
  before(async () => {
    ({ root, cleanup } = await tempRoot());
    script = path.join(root, "parent.mjs");
    await writeFile(
      script,
      [
        `import { createSpawnHost } from ${JSON.stringify(HOST_MODULE)};`,
        "const host = createSpawnHost();",
        'const child = host.spawn("true", [], { cwd: "/" });',
        "child.stdout.resume(); child.stderr.resume();",
        'child.on("close", () => {',
        '  if (process.argv[2] !== "hold") return process.stdout.write(`${host.hostPid}\\n`);',
        "  // Parent dies while the host still runs a child of its own.",
        '  const sleeper = host.spawn("sleep", ["30"], { cwd: "/" });',
        '  sleeper.on("spawn", () => process.stdout.write(`${host.hostPid} ${sleeper.pid}\\n`));',
        "});",
        "",
      ].join("\n"),
    );
  });
  after(async () => {
    await cleanup();
  });

  it("the host exits when its parent dies", async () => {
    const parent = startNode(script, ["hold"]);
    const [hostPid = 0, sleeper = 0] = (await parent.firstLine).split(" ").map(Number);
    assert.ok(hostPid > 0 && sleeper > 0 && !pidGone(hostPid));
    parent.child.kill("SIGKILL");
    try {
      assert.ok(await eventually(() => pidGone(hostPid), 3_000), "the spawn host outlived its parent");
    } finally {
      process.kill(sleeper, "SIGKILL");
    }
  });

  it("an idle host does not keep its parent alive", async () => {
    const parent = startNode(script, []);
    const hostPid = Number(await parent.firstLine);
    const exited = new Promise<number | null>((resolve) => parent.child.once("exit", (code) => resolve(code)));
    const timer = setTimeout(() => parent.child.kill("SIGKILL"), 5_000);
    assert.equal(await exited, 0, "the parent did not exit by itself");
    clearTimeout(timer);
    assert.ok(await eventually(() => pidGone(hostPid), 3_000));
  });
});

describe("spawn host environment", () => {
  it("a child reading its parent's /proc environ (the host's) finds no Runner secret", async () => {
    process.env["WEBCODEX_RUNNER_TOKEN"] = "spawn-host-probe-secret";
    const host = createSpawnHost({ logger: silentLogger() });
    try {
      const seen = await observe(host.spawn("sh", ["-c", "cat /proc/$PPID/environ; echo; env"], { cwd: "/" }));
      const text = seen.stdout.toString("utf8");
      assert.match(text, /PATH=/, "the probe read the environment");
      assert.equal(text.includes("spawn-host-probe-secret"), false);
      assert.equal(text.includes("WEBCODEX_"), false);
    } finally {
      delete process.env["WEBCODEX_RUNNER_TOKEN"];
      await host.close();
    }
  });
});
