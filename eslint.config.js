// Lint: typescript-eslint's recommended type-aware rules plus the house rules of docs/design.md.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

/** An import pattern forbidding the folders `forbidden`. */
function forbid(forbidden, message) {
  return { regex: `(^|/)(${forbidden.join("|")})/`, message };
}

/** Files matching `files` may not import from the top-level folders `forbidden` (nor match the `more` patterns). */
function layer(files, forbidden, message, more = []) {
  return [{ files: [files], rules: { "no-restricted-imports": ["error", { patterns: [forbid(forbidden, message), ...more] }] } }];
}

/**
 * Each of the sibling folders `folders` of `parent` may not import the others. A file matched by
 * several configs gets the last one's options for a rule (flat config does not merge them), so
 * the parent's own patterns (`inherited`) are repeated here.
 */
function siblings(parent, folders, inherited, message) {
  return folders.map((folder) => ({
    files: [`${parent}/${folder}/**`],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            ...inherited,
            forbid(
              folders.filter((f) => f !== folder),
              message,
            ),
          ],
        },
      ],
    },
  }));
}

const API_OPERATOR = "The API and the operator never import each other: share through crds/ (the contract) or kube/.";

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
  ...layer("api/**", ["operator"], API_OPERATOR),
  ...layer("operator/**", ["api"], API_OPERATOR),
  // The operator's controllers are siblings over one kit (docs/operator-runtime.md): app/,
  // release/ and domain/ import kit/, runtime/ and the top-level crds/ and kube/, never each other.
  ...siblings(
    "operator",
    ["app", "release", "domain"],
    [forbid(["api"], API_OPERATOR)],
    "The operator's controllers never import each other: put what they share in operator/kit/.",
  ),
  {
    files: ["operator/kit/**"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            forbid(["api"], API_OPERATOR),
            forbid(["app", "release", "domain"], "operator/kit/ is what the controllers share: it imports none of them."),
          ],
        },
      ],
    },
  },
  ...layer("crds/**", ["api", "operator", "kube", "toolkit"], "crds/ is the contract: zod schemas and constants, no runtime code."),
  ...layer(
    "kube/**",
    ["api", "operator", "toolkit"],
    "kube/ is the plumbing both processes import (Kubernetes, addresses); it knows neither.",
  ),
  ...layer(
    "toolkit/**",
    ["api", "operator", "crds", "kube"],
    "The toolkit ships as its own package: it imports nothing of the platform's.",
  ),
  // A sample is a user's service: the toolkit through its package's entry points only (a relative
  // path into toolkit/ is refused: the sample's image holds the packed package, not the sources;
  // "@berth/toolkit/langchain" is not a relative path, so the pattern leaves it alone).
  ...layer(
    "samples/**",
    ["api", "operator", "crds", "kube"],
    "A sample is a user's service: it may use the toolkit, nothing else of ours (its image ships only the toolkit).",
    [
      {
        regex: "^\\.{0,2}/(.*/)?toolkit(/|$)",
        message:
          "A sample imports the toolkit as a user does: @berth/toolkit, @berth/toolkit/langchain, ... (toolkit/package.json's exports), never a path into toolkit/ (its image holds the packed package, not the sources).",
      },
    ],
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
              // one exception: the guards' lists of names, a module of constants (no code of theirs is bundled)
              regex: "^(?!(\\.\\./){4}toolkit/src/guards/kinds\\.ts$)(node:|(\\.\\./){2,}|.*(^|/)(operator|crds|kube|toolkit)/)",
              message:
                "The console runs in the browser: it calls the API (openapi.gen.ts types it) and imports no server code (only toolkit/src/guards/kinds.ts, constants).",
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
