// An environment variable changed for one test, and put back as it was at the test's end.
import type { ExecutionContext } from "ava";

/** Sets `name` to `value` (removes it for undefined) for the rest of test `t`; its teardown restores it, absent if it was. */
export function envFor(t: ExecutionContext, name: string, value: string | undefined): void {
  const saved = process.env[name];
  const set = (v: string | undefined) => {
    if (v === undefined) delete process.env[name];
    else process.env[name] = v;
  };
  t.teardown(() => set(saved));
  set(value);
}
