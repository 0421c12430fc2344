// Cryptocurrency addresses: Bitcoin legacy/P2SH (Base58Check, verified with double SHA-256),
// Bitcoin SegWit (bech32 / bech32m checksum, BIP-173 / BIP-350) and Ethereum (0x + 40 hex).
import { hash } from "node:crypto";
import type { Hit } from "../types.ts";
import { lastChars } from "../text.ts";
import type { PiiDetector } from "./common.ts";
import { scan } from "./common.ts";
import { SpanSet } from "../spans.ts";

const BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const BASE58_ADDR = /(?<![A-Za-z0-9])[13][1-9A-HJ-NP-Za-km-z]{25,34}(?![A-Za-z0-9])/g;
const BECH32_ADDR = /(?<![A-Za-z0-9])(?:bc|tb)1[02-9ac-hj-np-z]{11,71}(?![A-Za-z0-9])/gi;
const ETH_ADDR = /(?<![A-Za-z0-9])0x[0-9a-fA-F]{40}(?![A-Za-z0-9])/g;

function base58Decode(s: string): Uint8Array | null {
  let n = 0n;
  for (const ch of s) {
    const v = BASE58.indexOf(ch);
    if (v < 0) return null;
    n = n * 58n + BigInt(v);
  }
  const bytes: number[] = [];
  while (n > 0n) {
    bytes.unshift(Number(n & 0xffn));
    n >>= 8n;
  }
  for (const ch of s) {
    if (ch !== "1") break;
    bytes.unshift(0);
  }
  return Uint8Array.from(bytes);
}

const sha256 = (b: Uint8Array): Buffer => hash("sha256", b, "buffer");

/** Base58Check: 25 bytes for P2PKH/P2SH, last 4 = first 4 of SHA-256(SHA-256(payload)). */
export function isBase58CheckAddress(s: string): boolean {
  const bytes = base58Decode(s);
  // version byte 0x00 (P2PKH, "1...") or 0x05 (P2SH, "3...")
  if (!bytes || bytes.length !== 25 || (bytes[0] !== 0x00 && bytes[0] !== 0x05)) return false;
  const payload = bytes.subarray(0, 21);
  const check = sha256(sha256(payload));
  return check[0] === bytes[21] && check[1] === bytes[22] && check[2] === bytes[23] && check[3] === bytes[24];
}

const CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
function polymod(values: number[]): number {
  const GEN = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk ^= GEN[i]!;
  }
  return chk >>> 0;
}

/** BIP-173 (bech32, witness v0) and BIP-350 (bech32m, v1+) checksums. */
export function isBech32Address(addr: string): boolean {
  if (addr !== addr.toLowerCase() && addr !== addr.toUpperCase()) return false;
  const s = addr.toLowerCase();
  const sep = s.lastIndexOf("1");
  const hrp = s.slice(0, sep);
  const data = [...s.slice(sep + 1)].map((c) => CHARSET.indexOf(c));
  if (data.some((d) => d < 0) || data.length < 7) return false;
  const expanded = [...hrp]
    .map((c) => c.charCodeAt(0) >> 5)
    .concat(
      [0],
      [...hrp].map((c) => c.charCodeAt(0) & 31),
    );
  const check = polymod(expanded.concat(data));
  const version = data[0]!;
  return version === 0 ? check === 1 : check === 0x2bc830a3;
}

export const detectCrypto: PiiDetector = (text, claimed) => {
  const hits: Hit[] = [];
  const mine = new SpanSet(); // the spans of hits, for the next scans
  const push = (start: number, value: string, score: number, what: string) => {
    const end = start + value.length;
    if (claimed.overlaps(start, end) || mine.overlaps(start, end)) return;
    hits.push({ kind: "crypto_address", start, end, score, description: `${what} ending ${lastChars(value, 4)}` });
    mine.add(start, end);
  };
  if (text.includes("0x")) for (const m of scan(ETH_ADDR, text)) push(m.index, m[0], 0.85, "Ethereum address");
  if (/[bt]c1/i.test(text)) for (const m of scan(BECH32_ADDR, text)) if (isBech32Address(m[0])) push(m.index, m[0], 0.9, "Bitcoin address");
  if (/[13]/.test(text))
    for (const m of scan(BASE58_ADDR, text)) if (isBase58CheckAddress(m[0])) push(m.index, m[0], 0.9, "Bitcoin address");
  return hits;
};
