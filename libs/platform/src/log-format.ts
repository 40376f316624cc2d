/**
 * How the CLI writes its log lines (always to stderr): JSON lines for machines, or a short
 * human-readable line on a terminal. WEBCODEX_LOG_FORMAT=json|text chooses explicitly; the
 * default is text when stderr is a TTY and JSON otherwise.
 */
export type LogFormat = "json" | "text";

export function logFormatFor(env: NodeJS.ProcessEnv, isTty: boolean): LogFormat {
  const asked = env["WEBCODEX_LOG_FORMAT"];
  if (asked === "json" || asked === "text") return asked;
  if (asked !== undefined && asked !== "") throw new Error(`WEBCODEX_LOG_FORMAT must be json or text, got ${JSON.stringify(asked)}`);
  return isTty ? "text" : "json";
}

const RESERVED = new Set(["time", "level", "service", "msg"]);

function show(value: unknown): string {
  if (typeof value === "string") return /[\s"=]/.test(value) ? JSON.stringify(value) : value;
  return JSON.stringify(value) ?? String(value);
}

/** One JSON log record as `HH:MM:SS level msg key=value ...`. */
export function humanLine(json: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const time = typeof record["time"] === "string" ? record["time"].slice(11, 19) : "";
  const level = String(record["level"] ?? "info").padEnd(5);
  const fields = Object.entries(record)
    .filter(([k]) => !RESERVED.has(k))
    .map(([k, v]) => `${k}=${show(v)}`);
  return [time, level, String(record["msg"] ?? ""), ...fields].filter((s) => s !== "").join(" ");
}

/** The `write` function for createLogger: JSON lines as they are, or human lines. */
export function logWriter(format: LogFormat, out: { write(chunk: string): unknown } = process.stderr): (line: string) => void {
  return format === "json" ? (line) => void out.write(line + "\n") : (line) => void out.write(humanLine(line) + "\n");
}
