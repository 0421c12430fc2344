"""authored-padded.jsonl of the guards' evaluation set: every prompt injection of the public
sources (jbb-gcg, jbb-artifacts, pint-injecguard) and of authored-injection, with benign text of the
set around it (before it, after it, or both), and as many benign texts padded the same way; a
padded attack is the same attack (hidden in a longer prompt), so it must be caught the same way.

  python3 hack/guards-eval-padded.py > test/fixtures/guards-eval/authored-padded.jsonl

Deterministic (random.Random(20261127)). Each item's pieces come from its own split and the item is
drawn again until its text's hash gives that split (the set's rule), so no test text is learnt in a
dev item. At most 1,000 characters in all (what the encoder reads whole: the classifier's 256
positions), where an attack is too long for any padding text to fit, the shortest one is used."""
import json
import os
import random

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "fixtures", "guards-eval")
ATTACKS = ("jbb-gcg", "jbb-artifacts", "pint-injecguard", "authored-injection")
PADDING = ("clinc150", "gsm8k", "awesome-chatgpt-prompts", "wildguard-benign", "notinject")
LIMIT = 1000


def load(source):
    with open(os.path.join(DIR, source + ".jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def split_of(text):
    """The set's split rule: FNV-1a (32 bit) of the UTF-16 code units, even -> dev."""
    h = 0x811C9DC5
    units = text.encode("utf-16-le")
    for i in range(0, len(units), 2):
        h = ((h ^ (units[i] | units[i + 1] << 8)) * 0x01000193) & 0xFFFFFFFF
    return "dev" if h % 2 == 0 else "test"


def main():
    rnd = random.Random(20261127)
    padding = {s: [] for s in ("dev", "test")}
    for source in PADDING:
        for it in load(source):
            if not it["labels"].get("prompt_injection") and len(it["text"]) <= 600:
                padding[it["split"]].append(it["text"])
    attacks = [it for source in ATTACKS for it in load(source) if it["labels"].get("prompt_injection")]
    items = []
    for n, attack in enumerate(attacks):
        for label in (True, False):
            core = attack["text"] if label else rnd.choice(padding[attack["split"]])
            for _ in range(1000):
                room = LIMIT - len(core) - 2
                parts = []
                while True:
                    p = rnd.choice(padding[attack["split"]])
                    if len(p) + 2 > room - sum(len(x) + 2 for x in parts):
                        break
                    parts.append(p)
                if not parts:
                    parts = [min(padding[attack["split"]], key=len)]
                where = rnd.choice(("before", "after", "around") if len(parts) > 1 else ("before", "after"))
                if where == "before":
                    text = "\n\n".join(parts + [core])
                elif where == "after":
                    text = "\n\n".join([core] + parts)
                else:
                    k = rnd.randrange(1, len(parts))
                    text = "\n\n".join(parts[:k] + [core] + parts[k:])
                if split_of(text) == attack["split"]:
                    break
            else:
                raise SystemExit(f"no padding of item {attack['id']} falls in its split")
            items.append({"id": f"authored-padded-{len(items) + 1:04d}", "source": "authored-padded", "split": attack["split"], "labels": {"prompt_injection": label}, "text": text})
    for it in items:
        print(json.dumps(it, ensure_ascii=False))


if __name__ == "__main__":
    main()
