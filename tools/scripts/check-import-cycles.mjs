#!/usr/bin/env node
// Fails when relative imports form a cycle, type-only imports included (ESLint's
// import-x/no-cycle follows runtime imports only; a type cycle is a layering fault too).
// Usage: node tools/scripts/check-import-cycles.mjs [dir ...]   (default: libs services tools test)
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";

const SKIP = new Set(["node_modules", "dist", "gen", ".tools"]);
const IMPORT = /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?["'](\.{1,2}\/[^"']+)["']/g;

function sources(dir, out = []) {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) sources(p, out);
    else if (/\.(ts|mts)$/.test(name) && !name.endsWith(".d.ts")) out.push(normalize(p));
  }
  return out;
}

/** The import cycles among the TypeScript files under `dirs`, each as a list of files. */
export function findCycles(dirs) {
  const files = new Set(dirs.flatMap((d) => sources(d)));
  const edges = new Map();
  for (const f of files) {
    const targets = [];
    for (const m of readFileSync(f, "utf8").matchAll(IMPORT)) {
      const t = normalize(join(dirname(f), m[1]))
        .replace(/\.js$/, ".ts")
        .replace(/\.mjs$/, ".mts");
      if (files.has(t)) targets.push(t);
    }
    edges.set(f, targets);
  }
  // Tarjan's strongly connected components; any component of two or more files is a cycle.
  let index = 0;
  const idx = new Map(),
    low = new Map(),
    stack = [],
    on = new Set(),
    cycles = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v)) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const comp = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1) cycles.push(comp.sort());
    }
  };
  for (const v of files) if (!idx.has(v)) visit(v);
  return cycles;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const dirs = args.length > 0 ? args : ["libs", "services", "tools", "test"];
  const cycles = findCycles(dirs);
  for (const c of cycles) process.stderr.write(`import cycle (${c.length} files): ${c.map((f) => relative(process.cwd(), f)).join(" ↔ ")}\n`);
  if (cycles.length > 0) process.exit(1);
  process.stdout.write("check-import-cycles: no import cycles\n");
}
