// What the end-to-end tests (test/e2e/) read from the environment ./hack/test prepares.

/** An environment variable ./hack/test sets for the end-to-end tests; a clear error outside it. */
export function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the end-to-end tests through ./hack/test (it starts the real node, its registry and BuildKit, and builds the sample image)`);
  return v;
}
