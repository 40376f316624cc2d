/**
 * A fresh data dir's embedded Postgres cluster, made once and copied: PGlite's initdb costs
 * ~9 s of CPU (and a ~1 GB child process) on every first start of `webcodex dev`, and most
 * tests start it on a fresh data dir. The copy is what initdb would have written (the same
 * PGlite, run by the same libs/platform/dist/pglite-init.js); webcodex dev then opens it, runs
 * its migrations and checks its stores as on any first start. A test of the first start itself
 * (initdb in a child process, the cluster appearing in the data dir) does not seed its data dir:
 * test/integration/pglite-init.test.ts and cli.test.ts's default data dir.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
const initScript = join(repoRoot, "libs/platform/dist/pglite-init.js");

/** The template's directory, named by what makes its content: the PGlite release and the init and options code. */
function templateDir(): string {
  const hash = createHash("sha256");
  for (const file of [initScript, join(repoRoot, "libs/platform/dist/pglite-options.js"), join(repoRoot, "node_modules/@electric-sql/pglite/package.json")])
    hash.update(readFileSync(file));
  return join(tmpdir(), `webcodex-test-pglite-${hash.digest("hex").slice(0, 16)}`);
}

let made: Promise<string> | undefined;

/** The template cluster, made by pglite-init.js on first use (by whichever test process gets there first; a rename publishes it whole). */
function template(): Promise<string> {
  made ??= (async () => {
    const dir = templateDir();
    if (existsSync(join(dir, "PG_VERSION"))) return dir;
    const work = mkdtempSync(`${dir}.making-`);
    const cluster = join(work, "postgres");
    await new Promise<void>((resolve, reject) =>
      execFile(process.execPath, [initScript, cluster], { timeout: 300_000 }, (error, _stdout, stderr) =>
        error ? reject(new Error(`pglite-init ${cluster}: ${error.message}\n${stderr}`)) : resolve(),
      ),
    );
    try {
      renameSync(cluster, dir);
    } catch (error) {
      // Another test process published it first: theirs is the same cluster.
      if (!existsSync(join(dir, "PG_VERSION"))) throw error;
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    return dir;
  })();
  return made;
}

/** Puts a freshly initialized cluster at `<dataDir>/postgres` unless the data dir already has one. */
export async function seedPgliteCluster(dataDir: string): Promise<void> {
  const target = join(dataDir, "postgres");
  if (existsSync(target)) return;
  cpSync(await template(), target, { recursive: true });
}
