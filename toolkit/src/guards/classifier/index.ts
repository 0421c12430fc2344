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
    /**
     * The screen, in the builds that have one: heads learnt on the embeddings alone, which the graph
     * reads first; the layer runs on a window only where a screen score reaches its entry of the
     * input `screen` (one per output, in `outputs`' order). `floors`: per output, [threshold a
     * caller acts at, screen score under which the layer need not run] (screenFor).
     */
    screen: z
      .object({
        input: z.literal("screen"),
        layers: z.literal(0),
        outputs: z.array(z.enum(["score", "toxicity"])).min(1),
        floors: z.record(z.enum(["score", "toxicity"]), z.array(z.tuple([z.number().min(0).max(1), z.number().min(0).max(1)]))),
        training: z.record(z.string(), Training),
      })
      .optional(),
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
  /** How many windows the text was read in, and in how many of them the layer ran (the screen let the others pass). */
  windows?: { read: number; layer: number } | undefined;
}

/**
 * The thresholds a caller acts at, per head (ScoreFloors of scoreWithClassifier): where given, the
 * model's screen may spare the layer on a window whose screen score says it cannot reach them.
 * A head without a floor is not wanted: it asks the layer for nothing. Without floors at all every
 * window runs the layer and the scores are exact.
 */
export interface ScoreFloors {
  promptInjection?: number | undefined;
  toxicity?: number | undefined;
}

/** A screen score no sigmoid reaches: the head asks for no layer. */
const NEVER = 2;

/**
 * The screen entry for a caller's threshold `at` (undefined: the head is not wanted): the screen
 * score of the highest floor at or under it, in whatever order model.json lists them; 0 (the
 * layer always runs) under the lowest floor.
 */
export function screenFor(floors: ReadonlyArray<readonly [number, number]>, at: number | undefined): number {
  if (at === undefined) return NEVER;
  let best = -1;
  let screen = 0;
  for (const [floor, score] of floors)
    if (floor <= at && floor > best) {
      best = floor;
      screen = score;
    }
  return screen;
}

/** A text classifier: the probability (0-1) that a text is what it guards against. */
export interface TextClassifier {
  readonly info: ClassifierInfo;
  /** The prompt-injection score (scores(text).promptInjection), exact. */
  score(text: string): Promise<number>;
  /**
   * Each head's score. With `floors`, a score that reaches its head's floor is the layer's (as far
   * as the screen tells: docs/guards.md, "The screen"); under it, a window the screen passed gives
   * the screen's own score, which is under the floor.
   */
  scores(text: string, floors?: ScoreFloors): Promise<ClassifierScores>;
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
  async scores(text: string, floors?: ScoreFloors): Promise<ClassifierScores> {
    const screen = this.#screen(floors);
    let promptInjection = 0;
    let toxicity: number | undefined;
    let read = 0;
    let layer = 0;
    for (const ids of encodeWindows(text, this.#vocab, this.info.windows)) {
      const s = await this.#run(ids, screen);
      promptInjection = Math.max(promptInjection, s.promptInjection);
      if (s.toxicity !== undefined) toxicity = Math.max(toxicity ?? 0, s.toxicity);
      read++;
      if (s.layer) layer++;
    }
    return { promptInjection, ...(toxicity === undefined ? {} : { toxicity }), windows: { read, layer } };
  }

  /** The graph's `screen` input for these floors (zeros without floors: the layer always runs). */
  #screen(floors: ScoreFloors | undefined): Float32Array | undefined {
    const s = this.info.screen;
    if (!s) return undefined;
    const at = { score: floors?.promptInjection, toxicity: floors?.toxicity };
    return Float32Array.from(s.outputs, (o) => (floors ? screenFor(s.floors[o] ?? [], at[o]) : 0));
  }

  async #run(ids: readonly number[], screen: Float32Array | undefined): Promise<ClassifierScores & { layer: boolean }> {
    const n = ids.length;
    const positions = new BigInt64Array(n);
    for (let i = 0; i < n; i++) positions[i] = BigInt(i);
    const out = await this.#session.run({
      input_ids: new this.#ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, n]),
      position_ids: new this.#ort.Tensor("int64", positions, [1, n]),
      mask: new this.#ort.Tensor("float32", new Float32Array(n).fill(1), [1, n]),
      ...(screen ? { screen: new this.#ort.Tensor("float32", screen, [screen.length]) } : {}),
    });
    const score = (out.score?.data as Float32Array | undefined)?.[0];
    if (score === undefined || !Number.isFinite(score)) throw new Error("the classifier's graph gave no score");
    // a graph without a screen always runs its layer
    const layer = screen ? (out.layer?.data as Uint8Array | undefined)?.[0] === 1 : true;
    if (!this.info.toxicity) return { promptInjection: score, layer };
    const toxicity = (out[this.info.toxicity.output]?.data as Float32Array | undefined)?.[0];
    if (toxicity === undefined || !Number.isFinite(toxicity)) throw new Error("the classifier's graph gave no toxicity score");
    return { promptInjection: score, toxicity, layer };
  }

  async close(): Promise<void> {
    await this.#session.release();
  }
}
