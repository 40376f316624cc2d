/**
 * Runner engine benchmarks against plain baselines measured in the same run:
 * - a 1024-match guarded edit in a 5 MB file vs readFile + replaceAll + writeFile;
 * - search_project_texts on 20,000 files vs running rg directly with the same query.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { rgPath } from "@vscode/ripgrep";
import { createWorkspace } from "@webcodex/runner";
import { median, round } from "./stats.js";
import { benchDir } from "./project.js";
import type { BenchResult } from "./stats.js";

export async function benchBulkEdit(rounds = 7): Promise<BenchResult> {
  const root = benchDir("wcx-bench-edit-");
  const line = "0123456789".repeat(5) + "\n";
  const lines: string[] = [];
  for (let i = 0; lines.length * line.length < 5 * 1024 * 1024; i++) lines.push(i % 100 === 0 && i / 100 < 1024 ? `NEEDLE ${line}` : line);
  const content = lines.join("");
  writeFileSync(join(root, "big.txt"), content);
  writeFileSync(join(root, "baseline.txt"), content);
  const ws = createWorkspace({ root });
  const revision = async () => {
    const r = (await ws.readFiles({ files: [{ path: "big.txt", start_line: 1, end_line: 1 }] })) as { items: Array<{ read_revision?: string }> };
    return r.items[0]?.read_revision ?? "";
  };
  const base: number[] = [];
  const engine: number[] = [];
  let from = "NEEDLE";
  let to = "REPLACED";
  for (let i = 0; i < rounds; i++) {
    let t = performance.now();
    const text = await readFile(join(root, "baseline.txt"), "utf8");
    await writeFile(join(root, "baseline.txt"), i % 2 === 0 ? text.replaceAll("NEEDLE", "REPLACED") : text.replaceAll("REPLACED", "NEEDLE"));
    base.push(performance.now() - t);
    const rev = await revision();
    t = performance.now();
    await ws.editProjectFiles({
      changes: [
        {
          kind: "edit",
          path: "big.txt",
          expected_read_revision: rev,
          edits: [{ replace_exact: { old_text: from, new_text: to }, expected_match_count: 1024 }],
        },
      ],
    });
    engine.push(performance.now() - t);
    [from, to] = [to, from];
  }
  const b = median(base);
  const e = median(engine);
  return {
    name: "edit_1024_matches_5mb",
    metrics: { baseline_replaceall_write_ms: round(b, 1), edit_project_files_ms: round(e, 1), ratio: round(e / b, 2) },
    notes: "median of rounds; the engine also checks the revision, plans against one snapshot, writes a temp file and renames (target ratio <= 2)",
  };
}

function runRg(args: string[], cwd: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn(rgPath, args, { cwd, stdio: ["ignore", "pipe", "ignore"] });
    child.stdout.on("data", () => undefined);
    child.on("error", reject);
    child.on("close", () => resolve(performance.now() - t));
  });
}

export async function benchSearch(rounds = 7): Promise<BenchResult> {
  const root = benchDir("wcx-bench-search-");
  for (let d = 0; d < 200; d++) {
    const dir = join(root, `pkg${d}`, "src");
    mkdirSync(dir, { recursive: true });
    for (let f = 0; f < 100; f++) {
      const n = d * 100 + f;
      writeFileSync(
        join(dir, `file${f}.ts`),
        `// file ${n}\nexport function f${n}(x: number): number {\n  return x + ${n};\n}\n${n % 97 === 0 ? "// TODO: handle overflow\n" : ""}`,
      );
    }
  }
  const ws = createWorkspace({ root });
  const query = { pattern: "TODO: handle", max_results: 100 };
  // The same flags the engine passes to rg, so both read the same tree the same way.
  const rgArgs = [
    "--no-config",
    "--hidden",
    "--no-require-git",
    "--color",
    "never",
    "--glob",
    "!.git",
    "--no-heading",
    "--with-filename",
    "--line-number",
    "--case-sensitive",
    "--fixed-strings",
    "--regexp",
    "TODO: handle",
    "--",
    ".",
  ];
  const ours: number[] = [];
  const raw: number[] = [];
  await ws.searchProjectTexts({ queries: [query] });
  await runRg(rgArgs, root);
  for (let i = 0; i < rounds; i++) {
    raw.push(await runRg(rgArgs, root));
    const t = performance.now();
    const r = (await ws.searchProjectTexts({ queries: [query] })) as { results: Array<{ total?: number }> };
    ours.push(performance.now() - t);
    if (r.results[0]?.total !== 207) throw new Error(`search found ${r.results[0]?.total} matches, expected 207`);
  }
  const b = median(raw);
  const e = median(ours);
  return {
    name: "search_20000_files",
    metrics: { files: 20_000, rg_direct_ms: round(b, 1), search_project_texts_ms: round(e, 1), ratio: round(e / b, 2) },
    notes: "median of rounds; same query and flags (target ratio <= 1.15)",
  };
}
