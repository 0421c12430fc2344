// Lint: typescript-eslint's recommended type-aware rules plus the house rules of docs/design.md.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

/** Files matching `files` may not import from the top-level folders `forbidden`. */
function layer(files, forbidden, message) {
  const regex = `(^|/)(${forbidden.join("|")})/`;
  return [{ files: [files], rules: { "no-restricted-imports": ["error", { patterns: [{ regex, message }] }] } }];
}

export default tseslint.config(
  { ignores: ["node_modules/**", ".local/**", "toolkit/dist/**", "charts/**", "**/*.tmp.ts", "api/console/web/openapi.gen.ts"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-restricted-properties": [
        "error",
        { object: "process", property: "env", message: "Read configuration only in the config module (docs/design.md §5.7)." },
      ],
      "no-console": "error",
    },
  },
  // Layering (docs/design.md §1): the api and the operator never import each other, their contract is
  // crds/ (which imports no runtime code), kube/ is plumbing both use, and the toolkit ships on
  // its own (it imports nothing of ours).
  ...layer("api/**", ["operator"], "The API and the operator never import each other: share through crds/ (the contract) or kube/."),
  ...layer("operator/**", ["api"], "The API and the operator never import each other: share through crds/ (the contract) or kube/."),
  ...layer("crds/**", ["api", "operator", "kube", "toolkit"], "crds/ is the contract: zod schemas and constants, no runtime code."),
  ...layer("kube/**", ["api", "operator", "toolkit"], "kube/ is the Kubernetes plumbing both processes import; it knows neither."),
  ...layer(
    "toolkit/**",
    ["api", "operator", "crds", "kube"],
    "The toolkit ships as its own package: it imports nothing of the platform's.",
  ),
  ...layer(
    "samples/**",
    ["api", "operator", "crds", "kube"],
    "A sample is a user's service: it may use the toolkit, nothing else of ours (its image ships only the toolkit).",
  ),
  // The console (api/console/web) is browser code: TSX, type-checked through its own tsconfig
  // (the project service picks the nearest tsconfig.json, api/console/web/tsconfig.json). It talks
  // to the API over HTTP only, so it imports none of the server's code (its API types are generated).
  {
    files: ["api/console/web/**/*.ts", "api/console/web/**/*.tsx"],
    languageOptions: { parserOptions: { ecmaFeatures: { jsx: true } } },
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              regex: "^(node:|(\\.\\./){2,}|.*(^|/)(operator|crds|kube|toolkit)/)",
              message: "The console runs in the browser: it calls the API (openapi.gen.ts types it) and imports no server code.",
            },
          ],
        },
      ],
    },
  },
  { files: ["**/config.ts", "test/**", "hack/**"], rules: { "no-restricted-properties": "off", "no-console": "off" } },
  {
    files: ["test/**"],
    rules: {
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
    },
  },
  { files: ["eslint.config.js", "samples/**/*.js"], ...tseslint.configs.disableTypeChecked },
);
