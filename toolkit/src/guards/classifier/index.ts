// The guards' classifier: the model layer of the prompt_injection guard and of toxicity templates
// (docs/guards.md "The classifier"). A small encoder (the first layer of all-MiniLM-L6-v2, int8)
// and a logistic regression per guard in one ONNX graph (one encoder run scores both), built by
// hack/guard-model.ts from public weights and licensed public data, run by onnxruntime-node on one
// thread. The files (model.onnx,
// vocab.txt, model.json) are not in the npm package (13 MiB for a guard apps opt into): they come
// from the directory BERTH_GUARD_MODEL_DIR names, or the one given to loadInjectionClassifier;
// the graph's sha256 is checked against model.json before it is loaded. onnxruntime-node is an
// optional peer dependency: without it, loading fails with a message that says so.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { z } from "zod";
import type * as Ort from "onnxruntime-node";
import { readEnv } from "../../client/config.ts";
import { encodeWindows, parseVocabulary, windowStarts, type Vocabulary, type Windows } from "./wordpiece.ts";

/**
 * How the classifier reads a prompt: windows of 64 word pieces, one every 48 (one every 32 costs half
 * as much again and took a dense 1 KB prompt over the 10 ms budget), at most 32 (about 6 KB of
 * English read whole). hack/guard-model.ts builds the model for these; model.json records them, and
 * a loaded model is read with its own.
 */
export const CLASSIFIER_WINDOWS: Windows = { pieces: 64, stride: 48, max: 32 };

/**
 * What scoring a text of `chars` characters costs, in runs (a run: eight windows, what a dense 1 KB
 * prompt costs), estimated without the vocabulary (four characters a word piece, English's
 * average; a denser text takes more windows than estimated, never more than `max`, so at most
 * max / 8 runs): what the API counts against an app's budget of model runs.
 */
export function estimatedRuns(chars: number, windows: Windows = CLASSIFIER_WINDOWS): number {
  return Math.ceil(windowStarts(Math.ceil(chars / 4), windows).length / 8);
}

/** How a head was trained (model.json). */
const Training = z.object({
  split: z.string(),
  items: z.number().int(),
  positives: z.number().int(),
  sources: z.record(z.string(), z.number().int()),
  cvThresholdPrecision95: z.number(),
});

/** model.json: what the classifier is and how it was made (hack/guard-model.py writes it). */
export const ClassifierInfo = z
  .object({
    guard: z.literal("prompt_injection"),
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    encoder: z.object({
      name: z.string(),
      package: z.string(),
      license: z.string(),
      layers: z.number().int().positive(),
      of: z.number().int().positive(),
      quantisation: z.string(),
    }),
    tokenizer: z.object({ vocab: z.string(), lowercase: z.literal(true), maxTokens: z.number().int().min(3).max(512) }),
    /** How a prompt is read: windows of `pieces` word pieces (maxTokens - 2), one every `stride`, at most `max`; its score is their highest. */
    windows: z
      .object({ pieces: z.number().int().positive(), stride: z.number().int().positive(), max: z.number().int().positive().max(64) })
      .refine((w) => w.stride <= w.pieces, "a window's stride is at most its length"),
    training: Training,
    /** The toxicity head (output `toxicity` of the same graph), in the builds that have one. */
    toxicity: z.object({ output: z.literal("toxicity"), training: Training }).optional(),
  })
  .refine((i) => i.tokenizer.maxTokens === i.windows.pieces + 2, {
    message: "maxTokens is a window's pieces with [CLS] and [SEP]",
    path: ["tokenizer", "maxTokens"],
  });
export type ClassifierInfo = z.infer<typeof ClassifierInfo>;

/**
 * A text's scores (0-1), each the highest of its windows: that it is a prompt injection, and, with
 * a build that has the toxicity head, that it is toxic. One run of the encoder gives both.
 */
export interface ClassifierScores {
  promptInjection: number;
  toxicity?: number | undefined;
}

/** A text classifier: the probability (0-1) that a text is what it guards against. */
export interface TextClassifier {
  readonly info: ClassifierInfo;
  /** The prompt-injection score (scores(text).promptInjection). */
  score(text: string): Promise<number>;
  scores(text: string): Promise<ClassifierScores>;
  close(): Promise<void>;
}

/** The directory of the classifier's files: `BERTH_GUARD_MODEL_DIR` (undefined when it is not set). */
export function defaultClassifierDir(): string | undefined {
  return readEnv().guardModelDir;
}

async function runtime(): Promise<typeof Ort> {
  try {
    return await import("onnxruntime-node");
  } catch (err) {
    throw new Error(
      `the prompt-injection classifier needs the onnxruntime-node package (an optional peer dependency of @berth/toolkit): ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/** Loads the classifier from `dir` (default: defaultClassifierDir()). */
export async function loadInjectionClassifier(dir = defaultClassifierDir()): Promise<TextClassifier> {
  if (dir === undefined)
    throw Object.assign(
      new Error(
        "the prompt-injection classifier's files are not in the @berth/toolkit package: set BERTH_GUARD_MODEL_DIR to the directory of model.onnx, vocab.txt and model.json",
      ),
      { code: "ENOENT" },
    );
  const at = (name: string) => `${dir.replace(/\/$/, "")}/${name}`;
  const parsed = ClassifierInfo.safeParse(
    JSON.parse(
      await readFile(at("model.json"), "utf8").catch((err: NodeJS.ErrnoException) => {
        throw Object.assign(
          new Error(`the prompt-injection classifier's files are not in ${dir} (BERTH_GUARD_MODEL_DIR): ${err.message}`, { cause: err }),
          { code: err.code },
        );
      }),
    ),
  );
  // files of another build (one that read whole prompts has no windows) are refused, not misread
  if (!parsed.success)
    throw new Error(
      `${at("model.json")} is not a classifier this toolkit reads (${parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ")}): copy the files of the build that goes with it (node hack/guard-model.ts --copy-to DIR)`,
    );
  const info = parsed.data;
  const [graph, vocabText] = await Promise.all([readFile(at("model.onnx")), readFile(at(info.tokenizer.vocab), "utf8")]);
  const digest = createHash("sha256").update(graph).digest("hex");
  if (digest !== info.sha256) throw new Error(`${at("model.onnx")}: sha256 ${digest} is not the ${info.sha256} of model.json`);
  const vocab = parseVocabulary(vocabText);
  const ort = await runtime();
  const session = await ort.InferenceSession.create(graph, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
  });
  return new OnnxClassifier(info, vocab, ort, session);
}

let shared: Promise<TextClassifier> | undefined;

/**
 * The classifier of this thread, loaded once from defaultClassifierDir() (a failed load is not
 * kept: the next call tries again).
 */
export function sharedInjectionClassifier(): Promise<TextClassifier> {
  shared ??= loadInjectionClassifier().catch((err: unknown) => {
    shared = undefined;
    throw err;
  });
  return shared;
}

class OnnxClassifier implements TextClassifier {
  readonly info: ClassifierInfo;
  readonly #vocab: Vocabulary;
  readonly #ort: typeof Ort;
  readonly #session: Ort.InferenceSession;

  constructor(info: ClassifierInfo, vocab: Vocabulary, ort: typeof Ort, session: Ort.InferenceSession) {
    this.info = info;
    this.#vocab = vocab;
    this.#ort = ort;
    this.#session = session;
  }

  async score(text: string): Promise<number> {
    return (await this.scores(text)).promptInjection;
  }

  /** Each head's highest score over the text's windows (one window when it fits the model). */
  async scores(text: string): Promise<ClassifierScores> {
    let promptInjection = 0;
    let toxicity: number | undefined;
    for (const ids of encodeWindows(text, this.#vocab, this.info.windows)) {
      const s = await this.#run(ids);
      promptInjection = Math.max(promptInjection, s.promptInjection);
      if (s.toxicity !== undefined) toxicity = Math.max(toxicity ?? 0, s.toxicity);
    }
    return toxicity === undefined ? { promptInjection } : { promptInjection, toxicity };
  }

  async #run(ids: readonly number[]): Promise<ClassifierScores> {
    const n = ids.length;
    const positions = new BigInt64Array(n);
    for (let i = 0; i < n; i++) positions[i] = BigInt(i);
    const out = await this.#session.run({
      input_ids: new this.#ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, n]),
      position_ids: new this.#ort.Tensor("int64", positions, [1, n]),
      mask: new this.#ort.Tensor("float32", new Float32Array(n).fill(1), [1, n]),
    });
    const score = (out.score?.data as Float32Array | undefined)?.[0];
    if (score === undefined || !Number.isFinite(score)) throw new Error("the classifier's graph gave no score");
    if (!this.info.toxicity) return { promptInjection: score };
    const toxicity = (out[this.info.toxicity.output]?.data as Float32Array | undefined)?.[0];
    if (toxicity === undefined || !Number.isFinite(toxicity)) throw new Error("the classifier's graph gave no toxicity score");
    return { promptInjection: score, toxicity };
  }

  async close(): Promise<void> {
    await this.#session.release();
  }
}
