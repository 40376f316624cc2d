import { test } from "node:test";
import assert from "node:assert/strict";
import { humanLine, logFormatFor, logWriter } from "./log-format.js";
import { createLogger } from "./logger.js";

test("log format: text on a terminal, JSON otherwise, WEBCODEX_LOG_FORMAT wins; anything else is refused", () => {
  assert.equal(logFormatFor({}, true), "text");
  assert.equal(logFormatFor({}, false), "json");
  assert.equal(logFormatFor({ WEBCODEX_LOG_FORMAT: "json" }, true), "json");
  assert.equal(logFormatFor({ WEBCODEX_LOG_FORMAT: "text" }, false), "text");
  assert.throws(() => logFormatFor({ WEBCODEX_LOG_FORMAT: "pretty" }, true), /json or text/);
});

test("a human line: time, level, message, then the fields as key=value (strings with spaces quoted)", () => {
  const line = humanLine(
    JSON.stringify({
      time: "2026-12-03T10:11:12.345Z",
      level: "warn",
      service: "webcodex-dev",
      msg: "runner lost",
      runner_id: "r-1",
      why: "no heartbeat",
      n: 3,
    }),
  );
  assert.equal(line, '10:11:12 warn  runner lost runner_id=r-1 why="no heartbeat" n=3');
});

test("the logger writes the same record either way", () => {
  const json: string[] = [];
  const text: string[] = [];
  const sink = (into: string[]) => ({ write: (chunk: string) => into.push(chunk) });
  createLogger({ service: "s", write: logWriter("json", sink(json)) }).info("hello", { a: 1 });
  createLogger({ service: "s", write: logWriter("text", sink(text)) }).info("hello", { a: 1 });
  assert.equal((JSON.parse(json[0] ?? "") as { msg: string }).msg, "hello");
  assert.match(text[0] ?? "", /^\d\d:\d\d:\d\d info  hello a=1\n$/);
});
