// Throwaway X.509 certificates for tests, made with openssl (Node has no API that writes
// certificates; openssl is a system package of the scripts, hack/lib/system-packages.txt): a CA,
// and server and client certificates it signs, ECDSA P-256 as the chart's cert-manager Certificates.
//
//   const ca = makeCa("test CA");
//   const leaf = issueServerCertificate(ca, { dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"] });
import { execFileSync } from "node:child_process";
import { randomBytes, X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface Pem {
  /** PEM certificate. */
  cert: string;
  /** PEM private key. */
  key: string;
  /** The certificate's serial number (hex, upper case, as X509Certificate and getPeerCertificate give it). */
  serial: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

const serial = () =>
  `0x${randomBytes(12)
    .toString("hex")
    .replace(/^[89a-f]/, "1")}`;

function pem(dir: string, name: string): Pem {
  const cert = readFileSync(join(dir, `${name}.crt`), "utf8");
  return { cert, key: readFileSync(join(dir, `${name}.key`), "utf8"), serial: new X509Certificate(cert).serialNumber };
}

/** A self-signed CA certificate and its key, valid for a day. */
export function makeCa(commonName: string): Pem {
  const dir = mkdtempSync(join(tmpdir(), "berth-ca-"));
  try {
    openssl(
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        "1",
        "-set_serial",
        serial(),
        "-subj",
        `/CN=${commonName}`,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
      ],
      dir,
    );
    return pem(dir, "ca");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What a certificate `ca` signs is for: a server's names, or a client's name. */
export type CertificateFor = { server: { dnsNames?: string[]; ipAddresses?: string[] } } | { client: { commonName: string } };

/** A certificate signed by `ca`, valid for a day: a server's (its names as SANs) or a client's. */
export function issueCertificate(ca: Pem, what: CertificateFor): Pem {
  const dir = mkdtempSync(join(tmpdir(), "berth-leaf-"));
  try {
    writeFileSync(join(dir, "ca.crt"), ca.cert);
    writeFileSync(join(dir, "ca.key"), ca.key, { mode: 0o600 });
    let cn: string;
    let ext: string;
    if ("server" in what) {
      const names = what.server;
      const san = [...(names.dnsNames ?? []).map((n) => `DNS:${n}`), ...(names.ipAddresses ?? []).map((n) => `IP:${n}`)].join(",");
      cn = names.dnsNames?.[0] ?? names.ipAddresses?.[0] ?? "server";
      ext = `subjectAltName=${san}\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n`;
    } else {
      cn = what.client.commonName;
      ext = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n";
    }
    writeFileSync(join(dir, "ext"), ext);
    openssl(
      [
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-subj",
        `/CN=${cn}`,
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
      ],
      dir,
    );
    openssl(
      [
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-set_serial",
        serial(),
        "-days",
        "1",
        "-extfile",
        "ext",
        "-out",
        "leaf.crt",
      ],
      dir,
    );
    return pem(dir, "leaf");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A server certificate signed by `ca` for these names, valid for a day. */
export function issueServerCertificate(ca: Pem, names: { dnsNames?: string[]; ipAddresses?: string[] }): Pem {
  return issueCertificate(ca, { server: names });
}
