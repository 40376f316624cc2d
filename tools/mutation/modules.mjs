// The safety-critical modules `make mutation` mutates, and the compiled unit tests that must
// kill each mutant. Paths are relative to the module's package; `functions` narrows a file to
// the named top-level functions (the rest of that file is presentation, not a safety check).
export const MODULES = [
  {
    name: "path-policy",
    what: "path containment and project path normalization",
    pkg: "services/runner",
    mutate: ["src/workspace/path-policy.ts"],
    tests: ["dist/workspace/path-policy.test.js"],
  },
  {
    name: "edit-plan",
    what: "edit planning: matching, counts, overlap, output assembly",
    pkg: "services/runner",
    mutate: ["src/workspace/edit-plan.ts"],
    tests: ["dist/workspace/edit-plan.test.js"],
  },
  {
    name: "attempt-fences",
    what: "the Runner's Attempt fences",
    pkg: "services/runner",
    mutate: ["src/attempt-fences.ts"],
    tests: ["dist/attempt-fences.test.js"],
  },
  {
    name: "service-identity",
    what: "signed service tokens on internal calls",
    pkg: "libs/platform",
    mutate: ["src/service-identity.ts"],
    tests: ["dist/service-identity.test.js"],
  },
  {
    name: "runner-auth",
    what: "Runner credentials bound to one workspace",
    pkg: "services/runner-broker",
    mutate: ["src/runner-auth.ts"],
    tests: ["dist/runner-auth.test.js"],
  },
  {
    name: "caller-policy",
    what: "the broker's port split, gateway-only procedures and project ownership",
    pkg: "services/runner-broker",
    mutate: ["src/caller-policy.ts"],
    tests: ["dist/caller-policy.test.js"],
  },
  {
    name: "admission",
    what: "which tools a caller may use and what call_runtime_tool refuses",
    pkg: "libs/contracts",
    mutate: ["src/admission.ts"],
    functions: ["isWithheld", "withheldTools", "isAdmitted", "admittedTools", "gatewayRefusal", "forwardedCall"],
    // (tool-policy.test.js reads docs/ from the repository root, which the sandbox does not hold.)
    tests: ["dist/admission.test.js", "dist/catalog.test.js"],
  },
  {
    name: "concurrency",
    what: "the broker's per-project concurrency admission (in-process; the Redis one is tested against Redis)",
    pkg: "services/runner-broker",
    mutate: ["src/admission/concurrency.ts"],
    functions: ["createMemoryConcurrencyLimiter"],
    tests: ["dist/admission/concurrency.test.js"],
  },
  {
    name: "normalize",
    what: "argument normalization before validation",
    pkg: "libs/contracts",
    mutate: ["src/normalize.ts"],
    tests: ["dist/normalize.test.js"],
  },
];
