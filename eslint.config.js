// ESLint (flat config): typescript-eslint with type information, no import cycles, and the
// layer boundaries docs/development.md ("Repository layout") describes — checked, not just written down.
//
//   contract ← tokens, store ← llm ← compaction ← registry ← host ← server ← cli
//   (sdk, openclaw and mcp are public entry points built on contract, tokens and each other:
//   they import no other layer, as PUBLIC_ZONES checks)
//
// A layer may import the ones to its left, never those to its right. Engines (engines/*) import
// only the package's public entry points, the files package.json "exports" maps (plus src/tokens,
// `contextd/tokens`), exactly what an engine outside this repository can import.
import { createTypeScriptImportResolver } from "eslint-import-resolver-typescript";
import importX from "eslint-plugin-import-x";
import tseslint from "typescript-eslint";

const LAYERS = ["contract", "tokens", "store", "llm", "compaction", "registry", "host", "server", "cli"];
/** Which src/ directories each layer must not import (everything to its right). */
const above = (layer) =>
  LAYERS.slice(LAYERS.indexOf(layer) + 1).filter((l) => !(layer === "tokens" && l === "store") && !(layer === "store" && l === "tokens"));

const layerZones = LAYERS.flatMap((layer) =>
  above(layer).map((upper) => ({
    target: `./src/${layer}`,
    from: `./src/${upper}`,
    message: `src/${layer} is below src/${upper}: the layers import one way (contract ← tokens/store ← llm ← compaction ← registry ← host ← server ← cli)`,
  })),
);

/** The public entry points' directories import only contract, tokens and each other. */
const PUBLIC_ZONES = ["sdk", "openclaw", "mcp"].flatMap((dir) =>
  ["store", "llm", "compaction", "registry", "host", "server", "cli"].map((internal) => ({
    target: `./src/${dir}`,
    from: `./src/${internal}`,
    message: `src/${dir} is a public entry point: it is built on contract, tokens, sdk, openclaw and mcp only`,
  })),
);

/** The public entry points an engine may import (package.json "exports", and the tokenizer). */
const PUBLIC = [
  "src/sdk/engine-sdk.ts",
  "src/sdk/runtime-client.ts",
  "src/contract/index.ts",
  "src/tokens/index.ts",
  "src/openclaw/index.ts",
  "src/sdk/history-tools.ts",
  "src/mcp/index.ts",
];

export default tseslint.config(
  {
    ignores: [
      "dist/**",
      "node_modules/**",
      "src/contract/gen/**",
      "integrations/openclaw/dist/**",
      "integrations/openai-agents/dist/**",
      "integrations/ai-sdk/dist/**",
      "integrations/langchain/dist/**",
      "clients/**",
      "**/*.d.ts",
      "**/__pycache__/**",
    ],
  },
  {
    files: [
      "src/**/*.ts",
      "engines/**/*.ts",
      "bench/**/*.ts",
      "test/**/*.ts",
      "integrations/openclaw/src/**/*.ts",
      "integrations/openai-agents/src/**/*.ts",
      "integrations/ai-sdk/src/**/*.ts",
      "integrations/langchain/src/**/*.ts",
      "integrations/shared/src/**/*.ts",
    ],
    extends: [tseslint.configs.base],
    // tsconfig.test.json covers every file (tsconfig.json leaves the tests out).
    languageOptions: { parserOptions: { project: "./tsconfig.test.json", tsconfigRootDir: import.meta.dirname } },
    plugins: { "import-x": importX },
    settings: {
      "import-x/resolver-next": [createTypeScriptImportResolver({ project: "./tsconfig.test.json" })],
      // no-cycle parses the files it follows: with the TypeScript parser, and .ts counted as modules.
      "import-x/parsers": { "@typescript-eslint/parser": [".ts"] },
      "import-x/extensions": [".ts", ".js"],
    },
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports", disallowTypeAnnotations: false }],
      "@typescript-eslint/no-require-imports": "error",
      "no-fallthrough": "error",
      "import-x/no-cycle": ["error", { ignoreExternal: true }],
      "import-x/no-restricted-paths": ["error", { zones: [...layerZones, ...PUBLIC_ZONES] }],
    },
  },
  {
    // contextctl writes to the terminal only through src/cli/terminal-text.ts, which escapes control,
    // bidi and zero-width characters of tenant text (a colour code hiding text, a right-to-left override).
    files: ["src/cli/**/*.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector: "CallExpression[callee.object.object.name='process'][callee.object.property.name=/^(stdout|stderr)$/][callee.property.name='write']",
          message: "write through src/cli/terminal-text.ts (writeStdout, writeStderr, writeOut): it escapes what would act on the terminal",
        },
        {
          selector: "CallExpression[callee.object.name='console']",
          message: "write through src/cli/terminal-text.ts (writeStdout, writeStderr, writeOut): it escapes what would act on the terminal",
        },
      ],
    },
  },
  {
    files: ["engines/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              regex: String.raw`^(\.\./)+src/(?!sdk/engine-sdk\.js$|sdk/runtime-client\.js$|contract/index\.js$|tokens/index\.js$|openclaw/index\.js$|sdk/history-tools\.js$|mcp/index\.js$)`,
              message: `engines import only the package's public entry points (${PUBLIC.join(", ")}), as an engine outside this repository would`,
            },
          ],
        },
      ],
    },
  },
  {
    // The context explorer's front end (a browser bundle: its own tsconfig with the DOM types). It
    // talks to contextd only through its JSON API (explorer/src/api.ts), never contextd's modules.
    files: ["explorer/src/**/*.ts"],
    extends: [tseslint.configs.base],
    languageOptions: { parserOptions: { project: "./explorer/tsconfig.json", tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports", disallowTypeAnnotations: false }],
      "no-restricted-imports": [
        "error",
        { patterns: [{ regex: String.raw`^\.\./`, message: "the explorer's front end imports only its own modules and lit" }] },
      ],
      // Tenant text reaches the page only through lit's text bindings: no HTML from strings, no
      // unsafeHTML / unsafeSVG (they parse a string as markup).
      "no-restricted-syntax": ["error", { selector: "ImportDeclaration[source.value=/unsafe-/]", message: "no unsafe-* lit directives: tenant text is text" }],
      "no-restricted-properties": [
        "error",
        { property: "innerHTML", message: "render tenant text with lit bindings (text), never as HTML" },
        { property: "outerHTML", message: "render tenant text with lit bindings (text), never as HTML" },
        { property: "insertAdjacentHTML", message: "render tenant text with lit bindings (text), never as HTML" },
      ],
    },
  },
);
