/**
 * The operator's tenant skill catalogs setting (WEBCODEX_SKILL_CATALOGS_DIR): a directory with
 * one catalog directory per tenant, `<dir>/<tenant>/<skill>/SKILL.md`. Checked once at startup:
 * a set value that is not an existing directory stops the process rather than serving an
 * empty catalog by mistake.
 */
import { statSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { ConfigError } from "@webcodex/platform";

export const SKILL_CATALOGS_DIR_ENV = "WEBCODEX_SKILL_CATALOGS_DIR";

/** The absolute catalogs directory, or undefined when unset; throws ConfigError for a path that is not a directory. */
export function skillCatalogsDirFrom(value: string | undefined): string | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  const dir = isAbsolute(value) ? value : resolve(value);
  let ok = false;
  try {
    ok = statSync(dir).isDirectory();
  } catch {
    ok = false;
  }
  if (!ok) throw new ConfigError([`${SKILL_CATALOGS_DIR_ENV}: ${dir} is not a directory`]);
  return dir;
}
