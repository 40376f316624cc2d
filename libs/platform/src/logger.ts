/**
 * Structured logging to stderr: JSON lines, or readable lines on a terminal (log-format.ts).
 * Never log tokens, file contents or tool arguments.
 */
import { logFormatFor, logWriter } from "./log-format.js";

export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";
const order: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

export interface LoggerOptions {
  service: string;
  level?: LogLevel;
  write?: (line: string) => void;
}

export function createLogger(options: LoggerOptions, bound: Record<string, unknown> = {}): Logger {
  const threshold = order[options.level ?? "info"];
  const write = options.write ?? logWriter(logFormatFor(process.env, process.stderr.isTTY === true));
  const emit = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (order[level] < threshold) return;
    const record: Record<string, unknown> = { time: new Date().toISOString(), level, service: options.service, msg, ...bound, ...fields };
    if (record["error"] instanceof Error) {
      const e = record["error"];
      record["error"] = { name: e.name, message: e.message };
    }
    write(JSON.stringify(record));
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    child: (fields) => createLogger(options, { ...bound, ...fields }),
  };
}
