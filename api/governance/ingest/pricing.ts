// The versioned model price table: USD per 1M prompt and completion tokens for common models,
// extendable (and overridable) by configuration (BERTH_MODEL_PRICES). Each trace stores its cost
// and the version of the table that priced it, so that a later price change never rewrites history.
// Pure: no I/O.
import { createHash } from "node:crypto";
import { z } from "zod";

/** Bump when an entry below changes. */
export const BUILTIN_PRICE_VERSION = "2025-10-01";

export interface ModelPrice {
  /** USD per 1M prompt (input) tokens */
  prompt: number;
  /** USD per 1M completion (output) tokens */
  completion: number;
}

/** List prices (standard tier, no batch or cache discounts) from the providers' public pricing pages. */
export const BUILTIN_PRICES: Readonly<Record<string, ModelPrice>> = {
  // OpenAI
  "gpt-5": { prompt: 1.25, completion: 10 },
  "gpt-5-mini": { prompt: 0.25, completion: 2 },
  "gpt-5-nano": { prompt: 0.05, completion: 0.4 },
  "gpt-4.1": { prompt: 2, completion: 8 },
  "gpt-4.1-mini": { prompt: 0.4, completion: 1.6 },
  "gpt-4.1-nano": { prompt: 0.1, completion: 0.4 },
  "gpt-4o": { prompt: 2.5, completion: 10 },
  "gpt-4o-mini": { prompt: 0.15, completion: 0.6 },
  "gpt-4-turbo": { prompt: 10, completion: 30 },
  "gpt-4": { prompt: 30, completion: 60 },
  "gpt-3.5-turbo": { prompt: 0.5, completion: 1.5 },
  o1: { prompt: 15, completion: 60 },
  "o1-mini": { prompt: 1.1, completion: 4.4 },
  o3: { prompt: 2, completion: 8 },
  "o3-mini": { prompt: 1.1, completion: 4.4 },
  "o4-mini": { prompt: 1.1, completion: 4.4 },
  "text-embedding-3-small": { prompt: 0.02, completion: 0 },
  "text-embedding-3-large": { prompt: 0.13, completion: 0 },
  // Anthropic
  "claude-opus-4-1": { prompt: 15, completion: 75 },
  "claude-opus-4": { prompt: 15, completion: 75 },
  "claude-sonnet-4-5": { prompt: 3, completion: 15 },
  "claude-sonnet-4": { prompt: 3, completion: 15 },
  "claude-haiku-4-5": { prompt: 1, completion: 5 },
  "claude-3-7-sonnet": { prompt: 3, completion: 15 },
  "claude-3-5-sonnet": { prompt: 3, completion: 15 },
  "claude-3-5-haiku": { prompt: 0.8, completion: 4 },
  "claude-3-opus": { prompt: 15, completion: 75 },
  "claude-3-haiku": { prompt: 0.25, completion: 1.25 },
  // Google
  "gemini-2.5-pro": { prompt: 1.25, completion: 10 },
  "gemini-2.5-flash": { prompt: 0.3, completion: 2.5 },
  "gemini-2.5-flash-lite": { prompt: 0.1, completion: 0.4 },
  "gemini-2.0-flash": { prompt: 0.1, completion: 0.4 },
  "gemini-2.0-flash-lite": { prompt: 0.075, completion: 0.3 },
  "gemini-1.5-pro": { prompt: 1.25, completion: 5 },
  "gemini-1.5-flash": { prompt: 0.075, completion: 0.3 },
  // Mistral
  "mistral-large": { prompt: 2, completion: 6 },
  "mistral-small": { prompt: 0.2, completion: 0.6 },
};

const Price = z.number().min(0).max(100_000);

/** BERTH_MODEL_PRICES: models added to (or replacing entries of) the built-in table. */
export const ModelPricesConfig = z
  .object({
    version: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,40}$/, "1-40 characters of A-Z a-z 0-9 . _ -")
      .optional()
      .describe("Your revision of the extra prices; recorded on traces as <built-in version>+<version>"),
    models: z.record(z.string().min(1).max(200), z.object({ prompt: Price, completion: Price }).strict()),
  })
  .strict();
export type ModelPricesConfig = z.output<typeof ModelPricesConfig>;

export interface Cost {
  /** USD; 0 for an unknown model */
  costUsd: number;
  /** false when the model is in no price table (its cost is then 0) */
  priced: boolean;
  /** the price table entry that matched, e.g. "gpt-4o-mini" for "gpt-4o-mini-2024-07-18" */
  pricedAs: string | null;
}

// Suffixes after a known name that still mean that model: dated snapshots and tags
// ("gpt-4o-2024-08-06", "claude-3-5-sonnet-20241022", "claude-sonnet-4@20250514", "llama3:8b").
// Not ".": "gpt-4.5" is not "gpt-4".
const BOUNDARY = new Set(["-", "@", ":", "_"]);

export class PriceTable {
  readonly version: string;
  readonly #prices: Map<string, ModelPrice>;
  readonly #byLength: string[];
  readonly #memo = new Map<string, string | null>();

  constructor(extra?: ModelPricesConfig) {
    this.#prices = new Map(Object.entries(BUILTIN_PRICES));
    if (extra) {
      for (const [model, price] of Object.entries(extra.models)) this.#prices.set(normalizeModel(model), price);
      const digest = createHash("sha256")
        .update(JSON.stringify(Object.entries(extra.models).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))))
        .digest("hex")
        .slice(0, 8);
      this.version = `${BUILTIN_PRICE_VERSION}+${extra.version ?? `custom.${digest}`}`;
    } else {
      this.version = BUILTIN_PRICE_VERSION;
    }
    this.#byLength = [...this.#prices.keys()].sort((a, b) => b.length - a.length);
  }

  /** The table entry a model name is priced as: exact, else the longest entry it extends. */
  match(model: string): string | null {
    const name = normalizeModel(model);
    const memo = this.#memo.get(name);
    if (memo !== undefined) return memo;
    let found: string | null = null;
    if (this.#prices.has(name)) found = name;
    else {
      for (const key of this.#byLength) {
        if (name.length > key.length && name.startsWith(key) && BOUNDARY.has(name[key.length]!)) {
          found = key;
          break;
        }
      }
    }
    if (this.#memo.size < 10_000) this.#memo.set(name, found);
    return found;
  }

  cost(model: string, promptTokens: number, completionTokens: number): Cost {
    const key = this.match(model);
    if (key === null) return { costUsd: 0, priced: false, pricedAs: null };
    const p = this.#prices.get(key)!;
    const usd = (promptTokens * p.prompt + completionTokens * p.completion) / 1_000_000;
    return { costUsd: Math.round(usd * 1e10) / 1e10, priced: true, pricedAs: key };
  }
}

/** Lower-cased, without a provider path ("openai/gpt-4o", "models/gemini-1.5-pro"). */
export function normalizeModel(model: string): string {
  const m = model.trim().toLowerCase();
  const slash = m.lastIndexOf("/");
  return slash >= 0 ? m.slice(slash + 1) : m;
}
