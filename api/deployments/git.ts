// Git lookups of deployments (docs/deployments.md): a branch's head commit, read from the
// repository's smart HTTP ref advertisement through the outbound policy (api/http/outbound.ts),
// for a deploy that names no commit.
import type { Logger } from "../../kube/logger.ts";
import { DomainError } from "../errors.ts";
import { OutboundError, type Outbound, type OutboundResponse } from "../http/outbound.ts";

const GIT_TIMEOUT_MS = 15_000;
/** A ref advertisement larger than this is refused (a repository with tens of thousands of refs is a few MiB). */
export const GIT_REFS_LIMIT_BYTES = 8 * 1024 * 1024;

/**
 * A branch's head commit, from git's smart HTTP advertisement (info/refs?service=git-upload-pack),
 * fetched through the outbound policy. Every failure is the same 502 to the user: what the API
 * found at the URL (a status, a socket error, a refused address) goes to the log only.
 */
export async function branchHead(
  outbound: Outbound,
  repoUrl: string,
  branch: string,
  auth?: { username: string; password: string },
  log?: Logger,
): Promise<string | undefined> {
  const url = `${repoUrl.replace(/\/+$/, "")}/info/refs?service=git-upload-pack`;
  const headers: Record<string, string> = {
    "User-Agent": "git/berth",
    ...(auth ? { Authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString("base64")}` } : {}),
  };
  const unreachable = (detail: string) => {
    log?.info({ repoUrl, detail }, "a branch head could not be read");
    return new DomainError(
      502,
      "git_unreachable",
      `The branch ${branch} could not be read from the repository (no answer, an address the platform does not reach, or no Git server over HTTP(S) there): check gitRepoUrl and its credentials (gitInstallationId), or deploy a given commitSha.`,
    );
  };
  let res: OutboundResponse;
  try {
    res = await outbound.get(url, { headers, timeoutMs: GIT_TIMEOUT_MS, maxBytes: GIT_REFS_LIMIT_BYTES });
  } catch (err) {
    throw unreachable(err instanceof OutboundError ? err.detail : String(err));
  }
  if (res.status < 200 || res.status > 299) throw unreachable(`the server answered ${res.status}`);
  return headOf(res.body, branch);
}

/** The sha of refs/heads/<branch> in a pkt-line ref advertisement. Pure. */
export function headOf(advertisement: Buffer, branch: string): string | undefined {
  let i = 0;
  const want = `refs/heads/${branch}`;
  while (i + 4 <= advertisement.length) {
    const len = Number.parseInt(advertisement.subarray(i, i + 4).toString(), 16);
    if (Number.isNaN(len)) return undefined;
    if (len === 0) {
      i += 4;
      continue;
    }
    const line = advertisement
      .subarray(i + 4, i + len)
      .toString()
      .replace(/\n$/, "");
    i += len;
    const [sha, rest] = line.split(" ", 2);
    const ref = rest?.split("\0")[0];
    if (ref === want && sha && /^[0-9a-f]{40}$/.test(sha)) return sha;
  }
  return undefined;
}
