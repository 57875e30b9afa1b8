#!/usr/bin/env python3
"""Writes the string_transform dataset (train.jsonl, val.jsonl) in skyrl's schema.

Deterministic: the same arguments always produce byte-identical files.
Validation inputs are distinct and never appear in the training split.

    python3 envs/string_transform/data/generate.py            # defaults below
    python3 generate.py --task reverse --alphabet abcdef --out /tmp/data
"""

import argparse
import json
import os
import random

TASKS = {
    "copy": lambda s: s,
    "reverse": lambda s: s[::-1],
    "sort": lambda s: "".join(sorted(s)),
}


def random_input(rng, alphabet, min_len, max_len):
    length = rng.randint(min_len, max_len)
    return "".join(rng.choice(alphabet) for _ in range(length))


def row(task, text, split, index):
    target = TASKS[task](text)
    return {
        "prompt": [{"role": "user", "content": f"{task}: {text}"}],
        "env_class": "string_transform",
        "reward_spec": {"method": "rule", "ground_truth": target},
        "extra_info": {"task": task, "input": text, "split": split, "index": index},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="copy", choices=[*TASKS, "mixed"])
    parser.add_argument("--alphabet", default="abcd")
    parser.add_argument("--min-len", type=int, default=3)
    parser.add_argument("--max-len", type=int, default=5)
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--val", type=int, default=100)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args()
    if not args.alphabet or not 1 <= args.min_len <= args.max_len:
        parser.error("need a non-empty alphabet and 1 <= min-len <= max-len")
    distinct = sum(len(args.alphabet) ** n for n in range(args.min_len, args.max_len + 1))
    if args.val >= distinct:
        parser.error(f"only {distinct} distinct inputs exist; --val must be smaller")

    rng = random.Random(args.seed)
    pick_task = (lambda: rng.choice(sorted(TASKS))) if args.task == "mixed" else (lambda: args.task)

    val_inputs = []
    seen = set()
    while len(val_inputs) < args.val:
        text = random_input(rng, args.alphabet, args.min_len, args.max_len)
        if text not in seen:
            seen.add(text)
            val_inputs.append(text)
    train_inputs = []
    while len(train_inputs) < args.train:
        text = random_input(rng, args.alphabet, args.min_len, args.max_len)
        if text not in seen:
            train_inputs.append(text)

    os.makedirs(args.out, exist_ok=True)
    for split, inputs in (("train", train_inputs), ("val", val_inputs)):
        path = os.path.join(args.out, f"{split}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for i, text in enumerate(inputs):
                f.write(json.dumps(row(pick_task(), text, split, i)) + "\n")
        print(f"wrote {len(inputs)} rows to {path}")


if __name__ == "__main__":
    main()
