// Lint: typescript-eslint's recommended type-aware rules plus the house rules of DESIGN.md.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/**", ".local/**", "toolkit/dist/**", "charts/**", "**/*.tmp.ts"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-restricted-properties": ["error", { object: "process", property: "env", message: "Read configuration only in the config module (DESIGN.md §5.7)." }],
      "no-console": "error",
    },
  },
  { files: ["**/config.ts", "test/**", "hack/**"], rules: { "no-restricted-properties": "off", "no-console": "off" } },
  { files: ["test/**"], rules: { "@typescript-eslint/no-unsafe-member-access": "off", "@typescript-eslint/no-unsafe-assignment": "off", "@typescript-eslint/no-unsafe-argument": "off", "@typescript-eslint/no-unsafe-call": "off", "@typescript-eslint/no-unsafe-return": "off" } },
  { files: ["eslint.config.js"], ...tseslint.configs.disableTypeChecked },
);
