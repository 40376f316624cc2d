/**
 * An upstream tool result as WebCodex hands it on: untrusted content, labelled with the server
 * and tool it came from, cut at the server's byte cap (with the cut stated), and kept under its
 * own fields so nothing the upstream says can pose as a WebCodex field (reason_code,
 * follow_up, ...). Binary content (images, audio, blobs) is described, never passed through.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

export interface LabelledResult extends Record<string, unknown> {
  upstream: { server: string; tool: string; trust: "untrusted" };
  content: Array<Record<string, unknown>>;
  structured_content?: unknown;
  is_error?: true;
  truncated?: true;
  /** Bytes of the upstream's content and structured content as received. */
  bytes: number;
}

/** Cuts `text` to at most `budget` UTF-8 bytes without splitting a character. */
function cutUtf8(text: string, budget: number): string {
  const buf = Buffer.from(text, "utf8");
  if (buf.byteLength <= budget) return text;
  let end = Math.max(0, budget);
  while (end > 0 && ((buf[end] as number) & 0xc0) === 0x80) end--;
  return buf.subarray(0, end).toString("utf8");
}

export function labelResult(server: string, tool: string, result: CallToolResult, maxBytes: number): LabelledResult {
  const items = Array.isArray(result.content) ? result.content : [];
  let budget = maxBytes;
  let truncated = false;
  let bytes = 0;
  const content: Array<Record<string, unknown>> = [];
  for (const item of items) {
    const raw = item as Record<string, unknown>;
    if (raw["type"] === "text" && typeof raw["text"] === "string") {
      const text = raw["text"];
      const size = Buffer.byteLength(text, "utf8");
      bytes += size;
      if (budget <= 0) {
        truncated = true;
        continue;
      }
      const kept = cutUtf8(text, budget);
      const keptBytes = Buffer.byteLength(kept, "utf8");
      budget -= keptBytes;
      if (keptBytes < size) {
        truncated = true;
        content.push({ type: "text", text: kept, truncated: true, total_bytes: size });
      } else content.push({ type: "text", text: kept });
      continue;
    }
    // Everything else is described by type and size only.
    const size = Buffer.byteLength(JSON.stringify(raw), "utf8");
    bytes += size;
    const mime = typeof raw["mimeType"] === "string" ? raw["mimeType"].slice(0, 100) : undefined;
    content.push({
      type: typeof raw["type"] === "string" ? raw["type"].slice(0, 40) : "unknown",
      ...(mime ? { mime_type: mime } : {}),
      bytes: size,
      omitted: true,
    });
  }
  const out: LabelledResult = { upstream: { server, tool, trust: "untrusted" }, content, bytes };
  if (result.structuredContent !== undefined) {
    const json = JSON.stringify(result.structuredContent);
    const size = Buffer.byteLength(json, "utf8");
    out.bytes += size;
    if (size <= budget) out.structured_content = result.structuredContent;
    else truncated = true;
  }
  if (result.isError === true) out.is_error = true;
  if (truncated) out.truncated = true;
  return out;
}
