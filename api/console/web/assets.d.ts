// CSS imports are bundled by esbuild into the console's one stylesheet (hack/console.ts).
declare module "*.css";
