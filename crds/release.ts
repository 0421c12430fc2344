// What the API and the operator share about Releases (docs/deployments.md): names, labels, which
// release serves, which phases are final. One definition each; both processes import them here.
import { API_VERSION, type ReleasePhase, type ReleaseSpec, type ReleaseStatus } from "./schemas.ts";

/** A Release as read from the API server (the Kubernetes client's object type satisfies it). */
export interface ReleaseObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name?: string;
    namespace?: string;
    uid?: string;
    generation?: number;
    creationTimestamp?: string | Date;
    deletionTimestamp?: string | Date;
    labels?: Record<string, string>;
  };
  spec: ReleaseSpec;
  status?: ReleaseStatus;
}

/**
 * Label on a release's Jobs and their pods naming the Release (a Release carries APP_LABEL naming
 * its App; its pods do not, so that they are never counted as the App's).
 */
export const RELEASE_LABEL = "berth.dev/release";
/** Label on a release's Job pods: build or release. */
export const RELEASE_STEP_LABEL = "berth.dev/release-step";

/** Releases kept per App (newest first); older ones are deleted, with their Jobs and logs. The serving one is always kept. */
export const RELEASE_HISTORY = 20;

export function releaseName(app: string, sequence: number): string {
  return `${app}-${sequence}`;
}

export function releaseRef(namespace: string, name: string): { apiVersion: string; kind: "Release"; namespace: string; name: string } {
  return { apiVersion: API_VERSION, kind: "Release", namespace, name };
}

/** Phases a release does not leave (superseded aside, which only a succeeded release reaches). */
const FINAL: ReadonlySet<ReleasePhase> = new Set(["build_failed", "release_failed", "failed", "superseded", "cancelled"]);
export function isFinal(phase: ReleasePhase | undefined): boolean {
  return phase !== undefined && FINAL.has(phase);
}

export function phaseOf(r: ReleaseObject): ReleasePhase {
  return r.status?.phase ?? "queued";
}

const bySequenceDesc = (a: ReleaseObject, b: ReleaseObject) => b.spec.sequence - a.spec.sequence;

/** The App's releases, newest first. */
export function newestFirst<R extends ReleaseObject>(releases: readonly R[]): R[] {
  return [...releases].sort(bySequenceDesc);
}

/**
 * The release the App's workload runs: the newest one that reached deploying (a build and a
 * release command that succeeded, or a rollback) and did not fail its rollout. A newer release
 * still building leaves the current one serving; a rollback is simply the newest.
 */
export function servingRelease<R extends ReleaseObject>(releases: readonly R[]): R | undefined {
  return newestFirst(releases).find((r) => {
    const p = phaseOf(r);
    return (p === "deploying" || p === "succeeded") && !!r.status?.image;
  });
}

/** Whether a release newer than `r` already serves or is rolling out (then `r` is cancelled when it gets there). */
export function overtaken(r: ReleaseObject, releases: readonly ReleaseObject[]): boolean {
  const serving = servingRelease(releases);
  return !!serving && serving.spec.sequence > r.spec.sequence;
}

/** The names of releases to delete: beyond the newest `keep`, never the serving one nor one still in progress. */
export function releasesToPrune(releases: readonly ReleaseObject[], keep = RELEASE_HISTORY): string[] {
  const serving = servingRelease(releases)?.metadata.name;
  return newestFirst(releases)
    .slice(keep)
    .filter((r) => r.metadata.name !== serving && (isFinal(phaseOf(r)) || phaseOf(r) === "succeeded"))
    .map((r) => r.metadata.name!);
}

/** A Job's name for a release's step: <release>-<step>, shortened with a hash to stay a valid label value (63). */
export function jobName(release: string, step: "build" | "release"): string {
  const full = `${release}-${step}`;
  if (full.length <= 63) return full;
  let h = 0;
  for (const c of full) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `${release.slice(0, 63 - step.length - 10).replace(/-+$/, "")}-${h.toString(36).padStart(7, "0").slice(0, 7)}-${step}`.slice(
    0,
    63,
  );
}

/** The Secret (username, password) of gitInstallationId's repositories, in the App's namespace: read by build Jobs and the API's branch lookup. */
export function gitCredentialsSecret(installationId: string): string {
  return `git-credentials-${installationId
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .slice(0, 200)}`;
}
