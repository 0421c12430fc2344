// HTTPS requests through the ingress's TLS port (Traefik's websecure entrypoint, forwarded to
// BERTH_INGRESS_TLS_URL) for a virtual host, as a browser sends them: SNI and Host carry the
// name, and the server's certificate is verified against `ca` for that name.
import { request } from "node:https";
import type { PeerCertificate, TLSSocket } from "node:tls";
import type { CoreV1Api } from "@kubernetes/client-node";

/** The CA certificate of the local CA ClusterIssuer (BERTH_DOMAIN_ISSUER): its Secret in cert-manager's namespace. */
export async function issuerCa(core: CoreV1Api, issuer: string): Promise<string> {
  const secret = await core.readNamespacedSecret({ namespace: "cert-manager", name: issuer });
  return Buffer.from(secret.data!["ca.crt"] ?? secret.data!["tls.crt"]!, "base64").toString();
}

export interface HttpsAnswer {
  status: number;
  text: string;
  certificate: PeerCertificate;
}

export function viaIngressTls(tlsUrl: string, host: string, ca: string | undefined, path = "/", timeoutMs = 10_000): Promise<HttpsAnswer> {
  const u = new URL(tlsUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: Number(u.port),
        path,
        method: "GET",
        servername: host,
        headers: { Host: host },
        ...(ca ? { ca } : { rejectUnauthorized: false }),
        timeout: timeoutMs,
        agent: false,
      },
      (res) => {
        const certificate = (res.socket as TLSSocket).getPeerCertificate();
        let text = "";
        res
          .setEncoding("utf8")
          .on("data", (d: string) => {
            text += d;
          })
          .on("end", () => resolve({ status: res.statusCode ?? 0, text, certificate }));
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer in ${timeoutMs} ms`))).on("error", reject);
    req.end();
  });
}
