// ESLint flat config: typescript-eslint with type information where rules need it.
import tseslint from "typescript-eslint";
import { importX } from "eslint-plugin-import-x";
import { createTypeScriptImportResolver } from "eslint-import-resolver-typescript";

const internals = { group: ["@webcodex/*/src/*", "@webcodex/*/dist/*"], message: "Import a package's public surface, not its internals." };
// Test support is pruned from the images: production code that imported it would fail there.
const testSupport = {
  group: ["**/*.test-support", "**/*.test-support.js", "@webcodex/runner/process-probes", "@webcodex/platform/prng"],
  message: "Test support is not in the images; production code cannot import it.",
};
const noContracts = {
  group: ["@webcodex/contracts", "@webcodex/contracts/*"],
  message: "libs/platform is plumbing and knows no tool: no @webcodex/contracts.",
};

export default tseslint.config(
  {
    ignores: [
      "**/dist/**",
      "**/node_modules/**",
      "libs/proto/src/gen/**",
      "libs/proto/src/index.ts",
      ".tools/**",
      "charts/**",
      "examples/**",
      "**/.stryker-tmp/**",
    ],
  },
  {
    files: ["**/*.ts"],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { "@typescript-eslint": tseslint.plugin, "import-x": importX },
    // Relative imports name the emitted .js; the TypeScript resolver maps them to the .ts source.
    settings: {
      "import-x/extensions": [".ts"],
      "import-x/parsers": { "@typescript-eslint/parser": [".ts"] },
      "import-x/resolver-next": [createTypeScriptImportResolver({ project: ["*/*/tsconfig.json"], noWarnOnMultipleProjects: true })],
    },
    rules: {
      // No runtime import cycles (type-only imports are checked by tools/scripts/check-import-cycles.mjs,
      // run by `make lint`). Packages cannot form one (tsc -b project references).
      "import-x/no-cycle": ["error", { ignoreExternal: true }],
      "@typescript-eslint/no-floating-promises": [
        "error",
        {
          allowForKnownSafeCalls: [
            { from: "package", package: "node:test", name: ["test", "it", "describe", "suite", "before", "after", "beforeEach", "afterEach"] },
          ],
        },
      ],
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "separate-type-imports" }],
      "no-restricted-syntax": ["error", { selector: "ExportAllDeclaration", message: "Export named symbols; no export *." }],
      "no-restricted-imports": ["error", { patterns: [internals] }],
    },
  },
  {
    files: ["libs/*/src/**/*.ts", "services/*/src/**/*.ts"],
    ignores: ["**/*.test.ts"],
    rules: { "no-console": "error" },
  },
  {
    files: ["libs/*/src/**/*.ts", "services/*/src/**/*.ts", "tools/cli/src/**/*.ts"],
    ignores: ["**/*.test.ts", "**/*.test-support.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [internals, testSupport] }] },
  },
  {
    // Plumbing knows no tool: libs/platform (transport, storage, telemetry) never imports the tool contracts.
    files: ["libs/platform/src/**/*.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [internals, noContracts] }] },
  },
  {
    files: ["libs/platform/src/**/*.ts"],
    ignores: ["**/*.test.ts", "**/*.test-support.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [internals, noContracts, testSupport] }] },
  },
  {
    // Every follow-up is made by a named builder in libs/contracts/src/follow-up.ts, which
    // validates its arguments against the target tool's schema (and is enumerated by a test).
    // The journaled tools are listed once, in libs/contracts/src/journaled-tools.ts.
    files: ["libs/*/src/**/*.ts", "services/*/src/**/*.ts"],
    ignores: ["**/*.test.ts", "libs/contracts/src/follow-up.ts", "libs/contracts/src/journaled-tools.ts", "libs/contracts/src/result.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        { selector: "ExportAllDeclaration", message: "Export named symbols; no export *." },
        {
          selector: "Property[key.name='follow_up_kind'], Property[key.value='follow_up_kind']",
          message: "Build follow-ups with a named builder in libs/contracts/src/follow-up.ts.",
        },
        {
          selector:
            "ArrayExpression:has(> Literal[value='edit_project_files']):has(> Literal[value='import_host_files']), TSUnionType:has(> TSLiteralType[literal.value='edit_project_files']):has(> TSLiteralType[literal.value='import_host_files'])",
          message: "The journaled tools have one owner: JOURNALED_TOOLS / isJournaledTool from @webcodex/contracts (libs/contracts/src/journaled-tools.ts).",
        },
        {
          selector:
            "TSUnionType > TSTypeLiteral[members.length=2]:has(> TSPropertySignature[key.name='ok']) > TSPropertySignature[key.name='failure'][typeAnnotation.typeAnnotation.typeName.name='ToolFailure']",
          message: "Write an answer that succeeded or failed as Result<{ ... }> from @webcodex/contracts (libs/contracts/src/result.ts).",
        },
      ],
    },
  },
  {
    // Job states have one owner, libs/contracts/src/job-states.ts: the services that handle Jobs
    // name a record state through JOB_STATE (or its types), never as a bare string. (The same
    // rule list as above, since a later no-restricted-syntax replaces an earlier one.)
    files: ["services/gateway/src/**/*.ts", "services/runner-broker/src/**/*.ts", "services/runner/src/**/*.ts"],
    ignores: ["**/*.test.ts", "**/*.test-support.ts", "**/testing/**"],
    rules: {
      "no-restricted-syntax": [
        "error",
        { selector: "ExportAllDeclaration", message: "Export named symbols; no export *." },
        {
          selector: "Property[key.name='follow_up_kind'], Property[key.value='follow_up_kind']",
          message: "Build follow-ups with a named builder in libs/contracts/src/follow-up.ts.",
        },
        {
          selector: "Literal[value=/^(queued|recovering|succeeded|lost_after_reconcile)$/]:not(TSLiteralType > Literal)",
          message: "Name a Job state through JOB_STATE from @webcodex/contracts (libs/contracts/src/job-states.ts owns the words).",
        },
        {
          selector:
            "ArrayExpression:has(> Literal[value='edit_project_files']):has(> Literal[value='import_host_files']), TSUnionType:has(> TSLiteralType[literal.value='edit_project_files']):has(> TSLiteralType[literal.value='import_host_files'])",
          message: "The journaled tools have one owner: JOURNALED_TOOLS / isJournaledTool from @webcodex/contracts (libs/contracts/src/journaled-tools.ts).",
        },
        {
          selector:
            "TSUnionType > TSTypeLiteral[members.length=2]:has(> TSPropertySignature[key.name='ok']) > TSPropertySignature[key.name='failure'][typeAnnotation.typeAnnotation.typeName.name='ToolFailure']",
          message: "Write an answer that succeeded or failed as Result<{ ... }> from @webcodex/contracts (libs/contracts/src/result.ts).",
        },
      ],
    },
  },
  {
    // A test waits FOR something with until() (test/support) or an event, never with a fixed
    // sleep in its straight-line flow. A window proving that something does NOT happen is
    // quietWindow(ms, why) from test/support, or a sleep under an eslint-disable-next-line whose
    // comment names the window. (Polling steps inside loops are not matched.)
    files: ["**/*.test.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        { selector: "ExportAllDeclaration", message: "Export named symbols; no export *." },
        {
          selector:
            ":matches(:function, TryStatement) > BlockStatement > ExpressionStatement > AwaitExpression > :matches(NewExpression[callee.name='Promise'][arguments.0.body.callee.name='setTimeout'], CallExpression[callee.name=/^(sleep|delay)$/])",
          message: "No fixed sleep in a test: wait with until() or an event; a window proving something does not happen is quietWindow(ms, why).",
        },
      ],
    },
  },
);
