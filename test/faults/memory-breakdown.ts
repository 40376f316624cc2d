/** Where a server process's memory is, for the soak's memory series: from /proc and from its /metrics. */
import { readFileSync } from "node:fs";

/**
 * Where the process's resident memory is, from /proc smaps (MiB): `wasm_resident_mib`, the
 * touched part of its large WebAssembly memories (PGlite's; V8 maps one as its accessible part
 * followed by a reservation of several GiB, and the accessible size only says how far it grew),
 * `malloc_heap_mib`, the C heap of the main arena ([heap]: native allocations of Node, libuv,
 * OpenSSL), and `other_anon_mib`, every other anonymous mapping (V8 heaps and code, thread
 * arenas, stacks).
 */
export function residentBreakdown(pid: number): Record<string, number> {
  try {
    const maps: Array<{ start: bigint; end: bigint; rssKib: number; reservation: boolean; name: string }> = [];
    for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
      const range = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
      if (range) maps.push({ start: BigInt(`0x${range[1]}`), end: BigInt(`0x${range[2]}`), rssKib: 0, reservation: range[3] === "---p", name: range[4] ?? "" });
      else if (line.startsWith("Rss:") && maps.length > 0) (maps[maps.length - 1] as { rssKib: number }).rssKib = Number(line.split(/\s+/)[1]);
    }
    let wasm = 0;
    let malloc = 0;
    let anon = 0;
    maps.forEach((m, i) => {
      const next = maps[i + 1];
      const isWasm =
        !m.reservation && next !== undefined && next.reservation && next.start === m.end && next.end - next.start >= 1n << 32n && m.end - m.start >= 64n << 20n;
      if (isWasm) wasm += m.rssKib;
      else if (m.name === "[heap]") malloc += m.rssKib;
      else if (m.name === "") anon += m.rssKib;
    });
    const mib = (kib: number) => Math.round(kib / 1024);
    return { wasm_resident_mib: mib(wasm), malloc_heap_mib: mib(malloc), other_anon_mib: mib(anon) };
  } catch {
    return {};
  }
}

/** The server's memory breakdown from its /metrics (MiB); empty when it does not answer. */
export async function memoryBreakdown(baseUrl: string): Promise<Record<string, number>> {
  const names: Record<string, string> = {
    heap_used_mib: "nodejs_heap_used_bytes",
    heap_total_mib: "nodejs_heap_total_bytes",
    external_mib: "nodejs_external_memory_bytes",
    array_buffers_mib: "nodejs_array_buffers_bytes",
    pglite_wasm_mib: "webcodex_pglite_wasm_memory_bytes",
    pglite_worker_heap_mib: "webcodex_pglite_worker_heap_used_bytes",
  };
  try {
    const text = await (await fetch(`${baseUrl}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
    const out: Record<string, number> = {};
    for (const [key, metric] of Object.entries(names)) {
      const value = new RegExp(`^${metric} (\\S+)$`, "m").exec(text)?.[1];
      if (value !== undefined) out[key] = Math.round(Number(value) / 1024 / 102.4) / 10;
    }
    return out;
  } catch {
    return {};
  }
}
