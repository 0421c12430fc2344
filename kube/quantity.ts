// Kubernetes resource quantities ("250m", "1.5", "128Mi", "12345n", "1e3") as numbers of the base
// unit (cores, bytes). Pure. The grammar is resource.Quantity's: a signed decimal number, then a
// binary suffix (Ki..Ei), a decimal one (n, u, m, k, M, G, T, P, E) or an exponent (e3, E-2).
const BINARY: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL: Record<string, number> = { n: 1e-9, u: 1e-6, m: 1e-3, "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };

const QUANTITY = /^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)$/;

/** The quantity in base units; throws on what is not a quantity. */
export function parseQuantity(q: string): number {
  const m = QUANTITY.exec(q.trim());
  if (!m) throw new Error(`not a quantity: ${q}`);
  const n = Number(m[1]);
  const suffix = m[2]!;
  if (suffix in BINARY) return n * BINARY[suffix]!;
  if (/^[eE]/.test(suffix)) return n * 10 ** Number(suffix.slice(1));
  return n * DECIMAL[suffix]!;
}
