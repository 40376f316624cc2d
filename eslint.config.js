// ESLint flat config: typescript-eslint with type information where rules need it.
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/dist/**", "**/node_modules/**", "libs/proto/src/gen/**", "libs/proto/src/index.ts", ".tools/**", "charts/**", "examples/**"] },
  {
    files: ["**/*.ts"],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { "@typescript-eslint": tseslint.plugin },
    rules: {
      "@typescript-eslint/no-floating-promises": [
        "error",
        { allowForKnownSafeCalls: [{ from: "package", package: "node:test", name: ["test", "it", "describe", "suite", "before", "after", "beforeEach", "afterEach"] }] },
      ],
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "separate-type-imports" }],
      "no-restricted-syntax": ["error", { selector: "ExportAllDeclaration", message: "Export named symbols; no export *." }],
      "no-restricted-imports": ["error", { patterns: [{ group: ["@webcodex/*/src/*", "@webcodex/*/dist/*"], message: "Import a package's public surface, not its internals." }] }],
    },
  },
  {
    files: ["libs/*/src/**/*.ts", "services/*/src/**/*.ts"],
    ignores: ["**/*.test.ts"],
    rules: { "no-console": "error" },
  },
);
