// An environment variable changed for a while, and put back as it was (absent if it was).
import type { ExecutionContext } from "ava";

/** Sets `name` to `value` (removes it for undefined); the function it returns puts it back as it was. */
export function setEnv(name: string, value: string | undefined): () => void {
  const saved = process.env[name];
  const set = (v: string | undefined) => {
    if (v === undefined) delete process.env[name];
    else process.env[name] = v;
  };
  set(value);
  return () => set(saved);
}

/** setEnv for the rest of test `t`: its teardown puts the variable back. */
export function envFor(t: ExecutionContext, name: string, value: string | undefined): void {
  t.teardown(setEnv(name, value));
}
