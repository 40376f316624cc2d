/**
 * `node pglite-init.js <dataDir>`: creates the PGlite cluster in a fresh data dir and exits.
 * Run as a child process by createPgliteDatabase so initdb's ~650 MB WASM heap lives and
 * dies outside the server (a WebAssembly memory never shrinks).
 */
import { PGlite } from "@electric-sql/pglite";
import { pgliteOptions } from "./pglite-options.js";

const dataDir = process.argv[2];
if (!dataDir) {
  process.stderr.write("usage: pglite-init <dataDir>\n");
  process.exit(2);
}
const db = await PGlite.create(pgliteOptions(dataDir));
await db.close();
