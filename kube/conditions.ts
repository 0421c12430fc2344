// Pure helpers for metav1.Condition lists: lastTransitionTime moves only on a real transition.
import type { Condition } from "../crds/schemas.ts";

export type ConditionInput = Omit<Condition, "lastTransitionTime">;

/** Returns a new list with `c` set; the old entry's lastTransitionTime is kept unless status changed. */
export function setCondition(list: readonly Condition[] | undefined, c: ConditionInput, now: Date): Condition[] {
  const current = list ?? [];
  const old = current.find((x) => x.type === c.type);
  const next: Condition = {
    type: c.type,
    status: c.status,
    ...(c.observedGeneration !== undefined ? { observedGeneration: c.observedGeneration } : {}),
    lastTransitionTime: old && old.status === c.status ? old.lastTransitionTime : now.toISOString(),
    reason: c.reason,
    message: c.message,
  };
  return old ? current.map((x) => (x.type === c.type ? next : x)) : [...current, next];
}

export function setConditions(list: readonly Condition[] | undefined, cs: readonly ConditionInput[], now: Date): Condition[] {
  return cs.reduce<Condition[]>((acc, c) => setCondition(acc, c, now), [...(list ?? [])]);
}

export function getCondition(list: readonly Condition[] | undefined, type: string): Condition | undefined {
  return list?.find((c) => c.type === type);
}

export function isTrue(list: readonly Condition[] | undefined, type: string): boolean {
  return getCondition(list, type)?.status === "True";
}

/**
 * The conditions of `types` (in that order) whose status or reason differs from the previous
 * list's, each with the one it replaces: what a status write tells as Events. Pure.
 */
export function conditionTransitions(
  prev: readonly Condition[] | undefined,
  next: readonly Condition[] | undefined,
  types: readonly string[],
): { condition: Condition; was: Condition | undefined }[] {
  const out: { condition: Condition; was: Condition | undefined }[] = [];
  for (const type of types) {
    const condition = next?.find((x) => x.type === type);
    if (!condition) continue;
    const was = prev?.find((x) => x.type === type);
    if (was && was.status === condition.status && was.reason === condition.reason) continue;
    out.push({ condition, was });
  }
  return out;
}
