/**
 * The validation process a validation Job runs (`node cli.js`, cwd = project root): reads
 * the canonical request as JSON on stdin, runs the validators and prints one
 * StructuredValidation JSON document on stdout. Being one process group, the whole run is
 * timed out and cancelled like any run_* Job.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { cargoCheckStep, cargoTestStep } from "./detect.js";
import { cargoPlan, detectProject, goTestPlan } from "./plan.js";
import type { Plan } from "./detect.js";
import { runPlan } from "./engine.js";
import type { CheckKind } from "./types.js";
import { CHECK_KINDS } from "./types.js";

export interface ValidationRequest {
  tool: "project_validate" | "cargo_check" | "cargo_test" | "go_test";
  args: Record<string, unknown>;
  capabilities: string[];
}

function planFor(root: string, req: ValidationRequest): Plan {
  const a = req.args;
  const pkg = typeof a["package"] === "string" ? { package: a["package"] } : {};
  switch (req.tool) {
    case "cargo_check":
      return cargoPlan(root, () => cargoCheckStep({ ...pkg, all_targets: a["all_targets"] === true }), pkg.package);
    case "cargo_test":
      return cargoPlan(root, () => cargoTestStep({ ...pkg, ...(typeof a["test_filter"] === "string" ? { test_filter: a["test_filter"] } : {}) }), pkg.package);
    case "go_test":
      return goTestPlan(root, {
        ...(Array.isArray(a["packages"]) ? { packages: a["packages"] as string[] } : {}),
        ...(typeof a["run"] === "string" ? { run: a["run"] } : {}),
      });
    case "project_validate": {
      const checks = Array.isArray(a["checks"]) && a["checks"].length > 0 ? (a["checks"] as CheckKind[]) : CHECK_KINDS.filter((c) => c !== "build");
      return detectProject({
        root,
        checks,
        paths: Array.isArray(a["paths"]) ? (a["paths"] as string[]) : [],
        capabilities: new Set(req.capabilities),
        pytest: () => spawnSync("python3", ["-c", "import pytest"], { stdio: "ignore", timeout: 10_000 }).status === 0,
      });
    }
  }
}

const req = JSON.parse(readFileSync(0, "utf8")) as ValidationRequest;
const root = process.cwd();
const result = await runPlan(root, planFor(root, req));
process.stdout.write(`${JSON.stringify(result)}\n`);
// The exit code mirrors the verdict, so a Job record kept without its output still tells them apart.
process.exitCode = result.status === "passed" ? 0 : 1;
