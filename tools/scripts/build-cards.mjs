#!/usr/bin/env node
// Builds the MCP App cards (services/gateway/cards/*.ts) into self-contained HTML documents in
// services/gateway/dist/cards/: the app-side ext-apps SDK bundled in, one inline script and
// one inline style, each allowed by its sha256 hash in the document's CSP (no remote scripts,
// no network). The gateway serves these files as ui://webcodex/<name>.html.
import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = fileURLToPath(new URL("../../services/gateway/", import.meta.url));
const CARDS = { "job-continuation": "Job", "agent-continuation": "Agent", "work-result": "Work result", "goal-plan": "Goal plan" };
const STYLE = `
:root { color-scheme: light dark; font: 14px/1.45 system-ui, sans-serif; }
body { margin: 0; padding: 12px 14px; }
h2 { font-size: 16px; margin: 0 0 8px; } h3 { font-size: 13px; margin: 12px 0 4px; }
.fact { margin: 2px 0; } .label { opacity: .7; }
ul, ol { margin: 0; padding-left: 20px; } .path { font-family: ui-monospace, monospace; }
.added { color: #1a7f37; } .removed { color: #cf222e; } .error { color: #cf222e; }
.badge { display: inline-block; min-width: 80px; font-size: 12px; opacity: .8; }
.step.completed .step-title { text-decoration: line-through; opacity: .7; }
`.trim();

const sha = (s) => `'sha256-${createHash("sha256").update(s, "utf8").digest("base64")}'`;
await mkdir(`${root}dist/cards`, { recursive: true });
for (const [name, title] of Object.entries(CARDS)) {
  const out = await build({
    entryPoints: [`${root}cards/${name}.ts`],
    bundle: true,
    write: false,
    format: "iife",
    platform: "browser",
    target: "es2022",
    minify: true,
    legalComments: "none",
    logLevel: "warning",
  });
  // A literal "</script" inside the bundle would end the element early.
  const js = out.outputFiles[0].text.replaceAll("</script", "<\\/script");
  const csp = [
    "default-src 'none'",
    `script-src ${sha(js)}`,
    `style-src ${sha(STYLE)}`,
    "img-src data:",
    "connect-src 'none'",
    "frame-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join("; ");
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>WebCodex ${title}</title>
<style>${STYLE}</style></head>
<body><main id="card">Loading…</main>
<script>${js}</script></body></html>
`;
  await writeFile(`${root}dist/cards/${name}.html`, html);
}
