"""A measurement, run by hand through hack/bench/guard-finetune.ts, never part of a build: the
classifier's heads on a frozen encoder (what hack/guard-model.py ships: the first N layers of
all-MiniLM-L6-v2, mean-pooled windows, a logistic regression per head) against the same layers
fine-tuned with both heads together (one encoder serves both in the shipped graph, so a
toxicity-only fine-tune would move the injection head's features).

Data: the request's items (the evaluation set's prompt_injection and toxicity items). Training
rows are the dev split's items of the sources a shipped model may learn from (guard-model.py's
TRAINABLE_SOURCES, the padded attacks left out), 4/5 trained on and 1/5 held out, chosen by a
seeded shuffle; every window of an item carries its label, and an item's score is its windows'
highest, as the toolkit reads. The held-out fifth picks each head's threshold (the lowest at which
its precision reaches 0.9) and the test split's public sources are scored at it: average precision,
and precision, recall and F1 at that threshold, per head, per epoch.

Fine-tuning: the word, position and type embeddings stay frozen (the vocabulary's rows are most of
the weights, and most pieces are rare in a few thousand items); the kept layers and both heads
learn with AdamW, each head's binary cross-entropy weighted by its class balance, the heads
started from the regressions. Needs PyTorch and transformers (the virtualenv the driver makes).
"""

import importlib.util
import json
import os
import random
import sys
import time

import numpy as np
import torch
from safetensors.torch import load_file
from sklearn.metrics import average_precision_score, precision_recall_fscore_support
from transformers import BertConfig, BertModel

spec = importlib.util.spec_from_file_location("guard_model", os.path.join(os.path.dirname(__file__), "..", "guard-model.py"))
gm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gm)

GUARDS = gm.GUARDS
HELD_OUT_PRECISION = 0.9


def main():
    req = json.load(sys.stdin)
    torch.manual_seed(req["seed"])
    torch.set_num_threads(req["threads"])
    rng = random.Random(req["seed"])
    directory = gm.model_dir()
    tokenizer = gm.tokenizer_of(directory)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    windows = req["windows"]
    public = set(req["publicSources"])

    def rows_of(items, guard):
        rows, groups = [], []
        for k, it in enumerate(items):
            pieces = tokenizer.encode(it["text"], add_special_tokens=False).ids
            for start in gm.window_starts(len(pieces), windows["pieces"], windows["stride"], windows["max"]):
                rows.append([cls, *pieces[start:start + windows["pieces"]], sep])
                groups.append(k)
        return {"rows": rows, "groups": np.array(groups), "y": np.array([it["labels"][guard] for it in items]), "items": items}

    data = {}
    for guard in GUARDS:
        labelled = [it for it in req["items"] if guard in it["labels"]]
        trainable = [it for it in labelled if it["split"] == "dev" and it["source"] in gm.TRAINABLE_SOURCES and it["source"] != gm.PADDED]
        rng.shuffle(trainable)
        held = len(trainable) // 5
        test = [it for it in labelled if it["split"] == "test" and it["source"] in public]
        data[guard] = {"train": rows_of(trainable[held:], guard), "held": rows_of(trainable[:held], guard), "test": rows_of(test, guard)}
        print(f"{guard}: train {len(trainable) - held} items ({len(data[guard]['train']['rows'])} windows), held out {held}, test public {len(test)}", flush=True)

    config = BertConfig.from_pretrained(directory)
    config.num_hidden_layers = req["layers"]
    bert = BertModel(config, add_pooling_layer=False)
    weights = {k.removeprefix("bert."): v for k, v in load_file(os.path.join(directory, "model.safetensors")).items()}
    missing, _ = bert.load_state_dict(weights, strict=False)
    if missing:
        raise SystemExit(f"guard-finetune.py: weights missing from the package: {missing}")
    bert.eval()

    def batches(rows, size):
        for i in range(0, len(rows), size):
            chunk = rows[i:i + size]
            width = max(len(r) for r in chunk)
            ids = torch.zeros(len(chunk), width, dtype=torch.long)
            mask = torch.zeros(len(chunk), width)
            for j, r in enumerate(chunk):
                ids[j, :len(r)] = torch.tensor(r)
                mask[j, :len(r)] = 1
            yield ids, mask

    def pooled(ids, mask):
        hidden = bert(input_ids=ids, attention_mask=mask).last_hidden_state
        mean = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return torch.nn.functional.normalize(mean, dim=-1)

    def vectors(rows):
        with torch.no_grad():
            return torch.cat([pooled(ids, mask) for ids, mask in batches(rows, 64)])

    def item_scores(window_scores, part):
        out = np.zeros(len(part["items"]))
        np.maximum.at(out, part["groups"], window_scores)
        return out

    def report(name, guard, held_scores, test_scores):
        held_y, test_y = data[guard]["held"]["y"], data[guard]["test"]["y"]
        threshold = 0.5
        for t in np.arange(0.05, 1.0, 0.01):
            hit = held_scores >= t
            if hit.sum() and held_y[hit].mean() >= HELD_OUT_PRECISION:
                threshold = float(t)
                break
        p, r, f, _ = precision_recall_fscore_support(test_y, test_scores >= threshold, average="binary", zero_division=0)
        ap = average_precision_score(test_y, test_scores)
        print(f"{name:26s} {guard:17s} AP {ap:.3f}   at {threshold:.2f}: P {p:.2f} R {r:.2f} F1 {f:.2f}", flush=True)

    def evaluate(name, score):
        for guard in GUARDS:
            d = data[guard]
            report(name, guard, item_scores(score(guard, d["held"]), d["held"]), item_scores(score(guard, d["test"]), d["test"]))

    started = time.time()
    heads = {}
    for guard in GUARDS:
        d = data[guard]["train"]
        regression = gm.regression("balanced").fit(vectors(d["rows"]).numpy(), d["y"][d["groups"]])
        head = torch.nn.Linear(config.hidden_size, 1)
        with torch.no_grad():
            head.weight.copy_(torch.tensor(regression.coef_, dtype=torch.float32))
            head.bias.copy_(torch.tensor(regression.intercept_, dtype=torch.float32))
        heads[guard] = head

    def head_scores(guard, part):
        with torch.no_grad():
            return torch.sigmoid(heads[guard](vectors(part["rows"]))).squeeze(-1).numpy()

    evaluate(f"frozen l{req['layers']} + regression", head_scores)
    print(f"  ({time.time() - started:.0f} s)", flush=True)

    for p in bert.embeddings.parameters():
        p.requires_grad = False
    optimiser = torch.optim.AdamW(
        [{"params": [p for p in bert.parameters() if p.requires_grad], "lr": req["lr"]}]
        + [{"params": h.parameters(), "lr": req["headLr"]} for h in heads.values()],
        weight_decay=0.01,
    )
    balance = {}
    for guard in GUARDS:
        d = data[guard]["train"]
        share = d["y"][d["groups"]].mean()
        balance[guard] = torch.tensor((1 - share) / share)
    order = [(guard, i) for guard in GUARDS for i in range(len(data[guard]["train"]["rows"]))]
    for epoch in range(1, req["epochs"] + 1):
        started = time.time()
        bert.train()
        rng.shuffle(order)
        for b in range(0, len(order), req["batch"]):
            chunk = order[b:b + req["batch"]]
            ((ids, mask),) = list(batches([data[g]["train"]["rows"][i] for g, i in chunk], len(chunk)))
            v = pooled(ids, mask)
            loss = torch.zeros(())
            for guard in GUARDS:
                picked = [k for k, (g, _) in enumerate(chunk) if g == guard]
                if not picked:
                    continue
                d = data[guard]["train"]
                y = torch.tensor(d["y"][d["groups"][[chunk[k][1] for k in picked]]], dtype=torch.float32)
                logits = heads[guard](v[picked]).squeeze(-1)
                loss = loss + torch.nn.functional.binary_cross_entropy_with_logits(logits, y, pos_weight=balance[guard]) * len(picked) / len(chunk)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        bert.eval()
        print(f"epoch {epoch} ({time.time() - started:.0f} s)", flush=True)
        evaluate(f"fine-tuned l{req['layers']}, epoch {epoch}", head_scores)


if __name__ == "__main__":
    main()
