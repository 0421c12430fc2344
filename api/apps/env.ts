// A service's environment variables (docs/api.md "Environment variables"): one Secret per App,
// `<app>-env` in the workspace's namespace, never a field of the App. The App owns it (permanent
// delete removes it) and the operator mounts it with envFrom, rolling the pods when its data
// changes (operator/app/builders.ts). Writes are compare-and-swap on the Secret's resourceVersion,
// retried on conflict, so concurrent writers never lose each other's changes. Values of secret
// variables never leave this module: not in answers, logs or errors.
import { setTimeout as sleep } from "node:timers/promises";
import type { z } from "zod";
import { API_VERSION, APP_LABEL } from "../../crds/schemas.ts";
import { ENV_PLAIN_ANNOTATION, MANAGED_BY, envSecretName } from "../../crds/app.ts";
import { API_FIELD_MANAGER, ownedBy, type KubeObject, type ObjectClient, type ObjectRef } from "../../kube/objects.ts";
import { isConflict } from "../../kube/transport.ts";
import type { Access } from "../../kube/rbac.ts";
import { ConflictError, DomainError, NotFoundError } from "../errors.ts";
import { ENV_LIMITS, type EnvVar, type EnvVarList, type SetEnvVarBody, type UpdateEnvBody } from "./schemas.ts";
import type { AppObject } from "./service.ts";

/** What the variables do in the cluster (RBAC from code, see api/rbac.ts). */
export const ENV_ACCESS: Access[] = [
  {
    group: "",
    resource: "secrets",
    verbs: ["get", "create", "patch"],
    scope: "workspace",
    why: "A service's environment variables are its <app>-env Secret: read, created, and changed by a merge patch with a resourceVersion precondition. RBAC cannot narrow create by name and the names are per App, so the API may read and patch any Secret of a workspace namespace, and of no other",
  },
];

export interface EnvVarState {
  value: string;
  secret: boolean;
}
export type EnvVars = ReadonlyMap<string, EnvVarState>;

/** One write: variables to set (`secret` omitted keeps the current flag; a new variable is secret) and names to remove. */
export interface EnvChange {
  set: Readonly<Record<string, { value: string; secret?: boolean | undefined }>>;
  unset: readonly string[];
}

type SecretObject = KubeObject & { data?: Record<string, string>; type?: string };
type Out<T extends z.ZodType> = z.output<T>;

/** 422 env_limit_exceeded: the change is valid but would take the service over a bound. */
export class EnvLimitError extends DomainError {
  constructor(detail: string, details: Record<string, unknown>) {
    super(422, "env_limit_exceeded", detail, { details });
  }
}

const WRITE_ATTEMPTS = 5;
/** Before attempt n+1 after a conflict: up to n × this many ms, at random (writers of other replicas drift apart). */
const RETRY_JITTER_MS = 50;

// ---- pure parts ------------------------------------------------------------------------------

/** Bytes of every name and value, UTF-8: what ENV_LIMITS.maxTotalBytes bounds. */
export function envBytes(vars: EnvVars): number {
  let n = 0;
  for (const [name, v] of vars) n += Buffer.byteLength(name, "utf8") + Buffer.byteLength(v.value, "utf8");
  return n;
}

/** The variables after `change`, checked against the bounds of a whole service (names and values are checked by the request schemas). */
export function applyEnvChange(
  current: EnvVars,
  change: EnvChange,
  limits: { maxVariables: number; maxTotalBytes: number } = ENV_LIMITS,
): Map<string, EnvVarState> {
  const next = new Map(current);
  for (const name of change.unset) next.delete(name);
  for (const [name, v] of Object.entries(change.set))
    next.set(name, { value: v.value, secret: v.secret ?? current.get(name)?.secret ?? true });
  if (next.size > limits.maxVariables) {
    throw new EnvLimitError(`A service has at most ${limits.maxVariables} variables; this change would leave ${next.size}`, {
      limit: limits.maxVariables,
      count: next.size,
    });
  }
  const bytes = envBytes(next);
  if (bytes > limits.maxTotalBytes) {
    throw new EnvLimitError(
      `A service's variables hold at most ${limits.maxTotalBytes} bytes (names and values, UTF-8); this change would make ${bytes}`,
      { limitBytes: limits.maxTotalBytes, bytes },
    );
  }
  return next;
}

export function sameEnv(a: EnvVars, b: EnvVars): boolean {
  if (a.size !== b.size) return false;
  for (const [name, v] of a) {
    const w = b.get(name);
    if (!w || w.value !== v.value || w.secret !== v.secret) return false;
  }
  return true;
}

/** The variables a Secret holds. A variable is readable only when the plain annotation names it: anything unclear is secret. */
export function varsOfSecret(secret: SecretObject | undefined): Map<string, EnvVarState> {
  const plain = plainNames(secret?.metadata.annotations?.[ENV_PLAIN_ANNOTATION]);
  return new Map(
    Object.entries(secret?.data ?? {}).map(([name, b64]) => [
      name,
      { value: Buffer.from(b64, "base64").toString("utf8"), secret: !plain.has(name) },
    ]),
  );
}

function plainNames(raw: string | undefined): Set<string> {
  try {
    const v: unknown = JSON.parse(raw ?? "[]");
    return new Set(Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);
  } catch {
    return new Set();
  }
}

/** The plain annotation's value for `vars`: the sorted names of the variables that are not secret. */
export function plainAnnotation(vars: EnvVars): string {
  return JSON.stringify(
    [...vars]
      .filter(([, v]) => !v.secret)
      .map(([name]) => name)
      .sort(),
  );
}

const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");

/** The `data` of a merge patch from `before` to `after`: changed values, null for removed names. */
export function dataPatch(before: EnvVars, after: EnvVars): Record<string, string | null> {
  const patch: Record<string, string | null> = {};
  for (const name of before.keys()) if (!after.has(name)) patch[name] = null;
  for (const [name, v] of after) if (before.get(name)?.value !== v.value) patch[name] = b64(v.value);
  return patch;
}

/** The `<app>-env` Secret holding `vars`: labelled as Berth's (the operator watches it) and owned by the App. */
export function buildEnvSecret(app: { name: string; namespace: string; uid: string }, vars: EnvVars): SecretObject {
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata: {
      name: envSecretName(app.name),
      namespace: app.namespace,
      labels: { "app.kubernetes.io/name": app.name, ...MANAGED_BY, [APP_LABEL]: app.name },
      annotations: { [ENV_PLAIN_ANNOTATION]: plainAnnotation(vars) },
      // No blockOwnerDeletion: that needs the App's finalizers (update), which the API does not hold.
      ownerReferences: [{ apiVersion: API_VERSION, kind: "App", name: app.name, uid: app.uid, controller: true }],
    },
    data: Object.fromEntries([...vars].map(([name, v]) => [name, b64(v.value)])),
  };
}

/** One variable as answered: the value of a secret variable is null. */
export function envVarView(name: string, v: EnvVarState): Out<typeof EnvVar> {
  return { name, value: v.secret ? null : v.value, secret: v.secret };
}

/** Every variable as answered, sorted by name (code points). */
export function envList(vars: EnvVars): Out<typeof EnvVarList> {
  return { data: [...vars.keys()].sort().map((name) => envVarView(name, vars.get(name)!)) };
}

/** PATCH's `set` with the string shorthand expanded. */
export function changeOf(body: UpdateEnvBody): EnvChange {
  const set = Object.fromEntries(Object.entries(body.set ?? {}).map(([name, v]) => [name, typeof v === "string" ? { value: v } : v]));
  return { set, unset: body.unset ?? [] };
}

// ---- the service -----------------------------------------------------------------------------

export interface EnvServiceDeps {
  /** The App of a workspace's service (404 app_not_found when there is none). */
  apps: { load(wsId: string, appId: string): Promise<AppObject> };
  kube: Pick<ObjectClient, "get" | "create" | "mergePatch">;
}

const notFound = (name: string) => new NotFoundError("env_var_not_found", `The service has no variable ${name}`);

export class EnvService {
  private readonly d: EnvServiceDeps;
  /** The last write queued per Secret: this replica's writes of one service's variables run one at a time. */
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(deps: EnvServiceDeps) {
    this.d = deps;
  }

  async list(wsId: string, appId: string): Promise<Out<typeof EnvVarList>> {
    return envList((await this.read(await this.d.apps.load(wsId, appId))).vars);
  }

  async get(wsId: string, appId: string, name: string): Promise<Out<typeof EnvVar>> {
    const v = (await this.read(await this.d.apps.load(wsId, appId))).vars.get(name);
    if (!v) throw notFound(name);
    return envVarView(name, v);
  }

  /** Sets and unsets many at once (PATCH): one write, all or nothing. Returns every variable. */
  async update(wsId: string, appId: string, body: UpdateEnvBody): Promise<Out<typeof EnvVarList>> {
    return envList((await this.write(wsId, appId, changeOf(body))).after);
  }

  /** Sets one (PUT); `created` when it did not exist. */
  async put(wsId: string, appId: string, name: string, body: SetEnvVarBody): Promise<{ created: boolean; variable: Out<typeof EnvVar> }> {
    const { before, after } = await this.write(wsId, appId, { set: { [name]: body }, unset: [] });
    return { created: !before.has(name), variable: envVarView(name, after.get(name)!) };
  }

  /** Removes one (DELETE): 404 when it is not set. */
  async remove(wsId: string, appId: string, name: string): Promise<void> {
    await this.write(wsId, appId, { set: {}, unset: [name] }, (vars) => {
      if (!vars.has(name)) throw notFound(name);
    });
  }

  /** The App's Secret, read past every cache (the API watches no Secrets), and its variables. */
  private async read(app: AppObject): Promise<{ secret: SecretObject | undefined; vars: Map<string, EnvVarState> }> {
    const secret = await this.d.kube.get<SecretObject>(this.refOf(app));
    if (secret && !ownedBy(secret, app, { controller: true })) {
      // e.g. the Secret of a deleted App of the same name, not yet collected: never taken over.
      throw new ConflictError(
        "env_secret_conflict",
        `Secret ${envSecretName(app.metadata.name!)} exists in the workspace and does not belong to this service; retry once it is gone`,
      );
    }
    return { secret, vars: varsOfSecret(secret) };
  }

  /**
   * Read, change, write with the read's resourceVersion as a precondition (a create when there is
   * no Secret yet); on a conflict (a writer of another replica, or kubectl), read again and redo the
   * change, WRITE_ATTEMPTS times. This replica's own writes of one service are queued, so they never
   * conflict with each other. A change that changes nothing writes nothing (and rolls nothing).
   */
  private async write(
    wsId: string,
    appId: string,
    change: EnvChange,
    precondition?: (vars: EnvVars) => void,
  ): Promise<{ before: EnvVars; after: EnvVars }> {
    const key = `${wsId}/${appId}`;
    const previous = this.queues.get(key) ?? Promise.resolve();
    const mine = previous.catch(() => undefined).then(() => this.writeNow(wsId, appId, change, precondition));
    this.queues.set(key, mine);
    try {
      return await mine;
    } finally {
      if (this.queues.get(key) === mine) this.queues.delete(key);
    }
  }

  private async writeNow(
    wsId: string,
    appId: string,
    change: EnvChange,
    precondition?: (vars: EnvVars) => void,
  ): Promise<{ before: EnvVars; after: EnvVars }> {
    for (let attempt = 1; ; attempt++) {
      const app = await this.d.apps.load(wsId, appId);
      const { secret, vars } = await this.read(app);
      precondition?.(vars);
      const after = applyEnvChange(vars, change);
      if (sameEnv(vars, after)) return { before: vars, after };
      try {
        if (!secret) {
          await this.d.kube.create(
            buildEnvSecret({ name: app.metadata.name!, namespace: app.metadata.namespace!, uid: app.metadata.uid! }, after),
            API_FIELD_MANAGER,
          );
        } else {
          await this.d.kube.mergePatch(
            this.refOf(app),
            {
              metadata: {
                resourceVersion: secret.metadata.resourceVersion,
                annotations: { [ENV_PLAIN_ANNOTATION]: plainAnnotation(after) },
              },
              data: dataPatch(vars, after),
            },
            API_FIELD_MANAGER,
          );
        }
        return { before: vars, after };
      } catch (err) {
        if (!isConflict(err)) throw err;
        if (attempt < WRITE_ATTEMPTS) {
          await sleep(Math.random() * attempt * RETRY_JITTER_MS);
          continue;
        }
        throw new ConflictError("concurrent_update", "The service's variables kept changing while they were being written; retry");
      }
    }
  }

  private refOf(app: AppObject): ObjectRef {
    return { apiVersion: "v1", kind: "Secret", namespace: app.metadata.namespace!, name: envSecretName(app.metadata.name!) };
  }
}
