#!/usr/bin/env python3
"""Writes the tiny chat SFT data set of configs/sft_demo.yaml (train.jsonl,
validation.jsonl): conversations in the `messages` format of skyrl 0.3.0's
SFT trainer, asking for string transforms of short random strings. Some rows
have a `system` column (prepended by the trainer, `system_key`), some are two
exchanges long (`train_on_what: all_assistant_messages` trains on both).

Deterministic: the same arguments always produce byte-identical files.
Validation strings never appear in the training split.

    python3 data/sft_demo/generate.py            # defaults below
"""

import argparse
import json
import os
import random

TASKS = {
    "copy": lambda s: s,
    "reverse": lambda s: s[::-1],
    "upper": lambda s: s.upper(),
}


def random_input(rng, alphabet, min_len, max_len):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(min_len, max_len)))


def exchange(task, text):
    return [
        {"role": "user", "content": f"{task}: {text}"},
        {"role": "assistant", "content": TASKS[task](text)},
    ]


def row(rng, texts):
    messages = []
    for text in texts:
        messages += exchange(rng.choice(sorted(TASKS)), text)
    out = {"messages": messages}
    if rng.random() < 0.25:
        out["system"] = "Answer with the transformed string only."
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alphabet", default="abcdef")
    parser.add_argument("--min-len", type=int, default=3)
    parser.add_argument("--max-len", type=int, default=6)
    parser.add_argument("--train", type=int, default=4000)
    parser.add_argument("--val", type=int, default=64)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args()
    rng = random.Random(args.seed)

    def texts(n, avoid):
        out = []
        while len(out) < n:
            t = random_input(rng, args.alphabet, args.min_len, args.max_len)
            if t not in avoid:
                out.append(t)
        return out

    val_texts = set()
    val_rows = []
    for _ in range(args.val):
        ts = texts(rng.choice([1, 1, 1, 2]), set())
        val_texts.update(ts)
        val_rows.append(row(rng, ts))
    train_rows = [row(rng, texts(rng.choice([1, 1, 1, 2]), val_texts)) for _ in range(args.train)]
    for name, rows in [("train.jsonl", train_rows), ("validation.jsonl", val_rows)]:
        with open(os.path.join(args.out, name), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    print(f"wrote {len(train_rows)} train and {len(val_rows)} validation conversations to {args.out}")


if __name__ == "__main__":
    main()
