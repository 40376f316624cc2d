/**
 * Git servers for tests, started on 127.0.0.1 with ports the OS picks: `git daemon` (git://)
 * and `git http-backend` behind a small HTTP server that demands HTTP Basic credentials.
 */
import { execFileSync, spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { scratchDir } from "./processes.js";
import { freePort } from "./ports.js";

const git = (cwd: string, ...args: string[]) => execFileSync("git", ["-c", "user.email=t@example.com", "-c", "user.name=t", ...args], { cwd, stdio: "ignore" });

/** A bare repository `<base>/<name>.git` with `files` on main and `branches` (name → extra files). */
export function createBareRepo(base: string, name: string, files: Record<string, string>, branches: Record<string, Record<string, string>> = {}): string {
  const work = scratchDir("wcx-git-work-");
  const write = (fs: Record<string, string>) => {
    for (const [path, content] of Object.entries(fs)) {
      mkdirSync(dirname(join(work, path)), { recursive: true });
      writeFileSync(join(work, path), content);
    }
  };
  git(work, "init", "-q", "-b", "main");
  write(files);
  git(work, "add", "-A");
  git(work, "commit", "-qm", "initial");
  for (const [branch, extra] of Object.entries(branches)) {
    git(work, "checkout", "-q", "-b", branch);
    write(extra);
    git(work, "add", "-A");
    git(work, "commit", "-qm", branch);
    git(work, "checkout", "-q", "main");
  }
  const bare = join(base, `${name}.git`);
  git(base, "clone", "-q", "--bare", work, bare);
  return bare;
}

export interface GitServer {
  /** Base URL; a repository is `${url}/<name>.git`. */
  url: string;
  close(): Promise<void>;
}

/** `git daemon` exporting every repository under `base`, listening on `host` (another loopback address than 127.0.0.1 if need be). */
export async function startGitDaemon(base: string, host = "127.0.0.1"): Promise<GitServer> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const child: ChildProcess = spawn("git", ["daemon", "--reuseaddr", "--export-all", `--base-path=${base}`, `--listen=${host}`, `--port=${port}`, base], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    const ready = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 5_000);
      child.once("exit", () => {
        clearTimeout(timer);
        resolve(false);
      });
      const poll = () => {
        const s = net.connect(port, host, () => {
          s.destroy();
          clearTimeout(timer);
          resolve(true);
        });
        s.once("error", () => setTimeout(poll, 50));
      };
      poll();
    });
    if (ready) {
      return {
        url: `git://${host}:${port}`,
        close: () =>
          new Promise<void>((r) => {
            if (child.exitCode !== null) return r();
            child.once("exit", () => r());
            child.kill("SIGTERM");
          }),
      };
    }
    child.kill("SIGKILL");
    if (attempt >= 3) throw new Error("git daemon did not start");
  }
}

/** `git http-backend` (CGI) behind HTTP Basic authentication with one username and password. */
export async function startGitHttpServer(
  base: string,
  credential: { username: string; password: string },
): Promise<GitServer & { requests: { authorized: number; refused: number } }> {
  const expected = `Basic ${Buffer.from(`${credential.username}:${credential.password}`).toString("base64")}`;
  const requests = { authorized: 0, refused: 0 };
  const server = http.createServer((req, res) => {
    if (req.headers.authorization !== expected) {
      requests.refused++;
      res.writeHead(401, { "www-authenticate": 'Basic realm="git"' }).end();
      return;
    }
    requests.authorized++;
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const cgi = spawn("git", ["http-backend"], {
      env: {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        GIT_PROJECT_ROOT: base,
        GIT_HTTP_EXPORT_ALL: "1",
        REQUEST_METHOD: req.method ?? "GET",
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers["content-type"] ?? "",
        REMOTE_USER: credential.username,
        REMOTE_ADDR: "127.0.0.1",
        GATEWAY_INTERFACE: "CGI/1.1",
        ...(req.headers["git-protocol"] ? { GIT_PROTOCOL: String(req.headers["git-protocol"]) } : {}),
      },
      stdio: ["pipe", "pipe", "ignore"],
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on("data", (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString("latin1").split("\r\n")) {
        const i = line.indexOf(":");
        const name = line.slice(0, i).trim().toLowerCase(),
          value = line.slice(i + 1).trim();
        if (name === "status") status = Number(value.split(" ")[0]);
        else if (name) headers[name] = value;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
    });
    cgi.stdout.on("end", () => res.end());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
