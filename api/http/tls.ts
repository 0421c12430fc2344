// The certificate of the API's internal TLS listener (BERTH_INTERNAL_TLS_*), from two PEM files
// that are replaced while the API runs: cert-manager renews the Certificate into its Secret and
// the kubelet rewrites the mounted files (an atomic swap of the volume's ..data link, within a
// minute or two). The files are read at start (a missing or unusable pair stops the start), then
// read again every few seconds; when either changed and the new pair makes a usable context, the
// running server serves it to new connections (tls.Server#setSecureContext). A pair that is not
// usable (a certificate written before its key, a key of another certificate) is logged and the
// previous one kept; it is tried again at the next read.
import { X509Certificate, createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createSecureContext, type Server as TlsServer } from "node:tls";
import type { Logger } from "../../kube/logger.ts";

export interface CertificateFiles {
  /** PEM certificate chain (the leaf first): cert-manager's tls.crt. */
  certFile: string;
  /** PEM private key of the leaf: cert-manager's tls.key. */
  keyFile: string;
}

/** How often the files are read again by default. The kubelet itself takes up to a minute or two to update a Secret's volume. */
export const CERTIFICATE_RELOAD_MS = 10_000;

export interface CertificatePair {
  cert: string;
  key: string;
}

/** What a log line says about a certificate: never the key. */
export function describeCertificate(cert: string): { subject: string; subjectAltName: string; serialNumber: string; validTo: string } {
  const x = new X509Certificate(cert);
  return { subject: x.subject, subjectAltName: x.subjectAltName ?? "", serialNumber: x.serialNumber, validTo: x.validTo };
}

/** A pair that makes a TLS context (the key belongs to the certificate), or a throw saying why not. */
function checked(pair: CertificatePair, files: CertificateFiles): CertificatePair {
  try {
    createSecureContext(pair);
    describeCertificate(pair.cert);
  } catch (err) {
    throw new Error(`the internal TLS certificate ${files.certFile} and key ${files.keyFile} are not usable: ${(err as Error).message}`, {
      cause: err,
    });
  }
  return pair;
}

/** The pair as it is on disk now, checked; throws when a file is missing or the pair is not usable. */
export function readCertificate(files: CertificateFiles): CertificatePair {
  const read = (path: string) => {
    try {
      return readFileSync(path, "utf8");
    } catch (err) {
      throw new Error(`cannot read ${path} (internal TLS): ${(err as Error).message}`, { cause: err });
    }
  };
  return checked({ cert: read(files.certFile), key: read(files.keyFile) }, files);
}

const digest = (p: CertificatePair) => createHash("sha256").update(p.cert).update("\0").update(p.key).digest("hex");

/**
 * Reads the files again every `intervalMs` and puts a changed, usable pair into `server`. `current`
 * is the pair the server was started with. Returns the function that stops the reading.
 */
export function reloadCertificate(
  server: TlsServer,
  files: CertificateFiles,
  opts: { current: CertificatePair; intervalMs?: number; logger: Logger },
): () => void {
  let loaded = digest(opts.current);
  /** What was last wrong (an unusable pair's digest, or a read error): logged once, not at every read. */
  let problem = "";
  let reading = false;
  const tick = async () => {
    if (reading) return;
    reading = true;
    try {
      let pair: CertificatePair;
      try {
        pair = { cert: await readFile(files.certFile, "utf8"), key: await readFile(files.keyFile, "utf8") };
      } catch (err) {
        // a file missing for a moment (replaced by hand, not atomically): the next read will tell
        if (problem !== (err as Error).message)
          opts.logger.warn({ err }, "internal TLS: cannot read the certificate files; still serving the previous certificate");
        problem = (err as Error).message;
        return;
      }
      const d = digest(pair);
      if (d === loaded) {
        problem = "";
        return;
      }
      try {
        server.setSecureContext(checked(pair, files));
      } catch (err) {
        if (problem !== d) opts.logger.warn({ err }, "internal TLS: the new certificate is not usable; still serving the previous one");
        problem = d;
        return;
      }
      loaded = d;
      problem = "";
      opts.logger.info({ certificate: describeCertificate(pair.cert) }, "internal TLS: serving the renewed certificate");
    } finally {
      reading = false;
    }
  };
  const timer = setInterval(() => void tick(), opts.intervalMs ?? CERTIFICATE_RELOAD_MS);
  timer.unref();
  return () => clearInterval(timer);
}
