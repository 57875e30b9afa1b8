"""Writes a small LiveCodeBench-style sample (train.jsonl, val.jsonl) in
skyrl's dataset schema: stdin/stdout problems whose tests come from running
a reference solution, so every row's tests are passed by its solution
(checked here with python3 and again by the Rust tests through the sandbox).

Usage: python3 envs/lcb/data/generate.py
"""

import json
import random
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent
SYSTEM = (
    "You are an expert Python programmer. Read the problem, then write a complete "
    "program that reads standard input and prints the answer. Put the final program "
    "in one fenced ```python code block."
)

# (name, statement, reference solution, input generator)
PROBLEMS = [
    ("sum_two", "Read two integers a and b on one line and print a + b.",
     "a, b = map(int, input().split())\nprint(a + b)",
     lambda r: f"{r.randint(-1000, 1000)} {r.randint(-1000, 1000)}\n"),
    ("max_list", "The first line has n; the second has n integers. Print the largest.",
     "input()\nprint(max(map(int, input().split())))",
     lambda r: (lambda xs: f"{len(xs)}\n{' '.join(map(str, xs))}\n")([r.randint(-99, 99) for _ in range(r.randint(1, 8))])),
    ("reverse_words", "Read a line of words and print them in reverse order, separated by single spaces.",
     "print(' '.join(input().split()[::-1]))",
     lambda r: " ".join(r.choice(["red", "green", "blue", "cat", "dog", "sun"]) for _ in range(r.randint(1, 6))) + "\n"),
    ("count_vowels", "Read a lowercase word and print how many vowels (a, e, i, o, u) it has.",
     "print(sum(c in 'aeiou' for c in input().strip()))",
     lambda r: "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(1, 12))) + "\n"),
    ("fizzbuzz", "Read n and print the numbers 1..n, one per line, with multiples of 3 replaced by Fizz, of 5 by Buzz, and of both by FizzBuzz.",
     "n = int(input())\nfor i in range(1, n + 1):\n    print('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else i)",
     lambda r: f"{r.randint(1, 20)}\n"),
    ("factorial", "Read n (0 <= n <= 20) and print n!.",
     "import math\nprint(math.factorial(int(input())))",
     lambda r: f"{r.randint(0, 20)}\n"),
    ("is_palindrome", "Read a word and print YES if it reads the same backwards, else NO.",
     "s = input().strip()\nprint('YES' if s == s[::-1] else 'NO')",
     lambda r: r.choice(["level", "abba", "abc", "racecar", "ab", "x", "noon", "skyrl"]) + "\n"),
    ("gcd", "Read two positive integers and print their greatest common divisor.",
     "import math\na, b = map(int, input().split())\nprint(math.gcd(a, b))",
     lambda r: f"{r.randint(1, 500)} {r.randint(1, 500)}\n"),
    ("sort_numbers", "The first line has n; the second has n integers. Print them sorted ascending, space separated.",
     "input()\nprint(*sorted(map(int, input().split())))",
     lambda r: (lambda xs: f"{len(xs)}\n{' '.join(map(str, xs))}\n")([r.randint(-50, 50) for _ in range(r.randint(1, 8))])),
    ("digit_sum", "Read a non-negative integer and print the sum of its digits.",
     "print(sum(map(int, input().strip())))",
     lambda r: f"{r.randint(0, 10**9)}\n"),
    ("mean", "The first line has n; the second has n integers. Print their mean with two decimals.",
     "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:.2f}')",
     lambda r: (lambda xs: f"{len(xs)}\n{' '.join(map(str, xs))}\n")([r.randint(0, 100) for _ in range(r.randint(1, 6))])),
    ("count_words", "Read a line and print how many words (separated by spaces) it has.",
     "print(len(input().split()))",
     lambda r: " ".join("w" * r.randint(1, 4) for _ in range(r.randint(0, 7))) + "\n"),
]


def run(code, stdin):
    out = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    return out.stdout


def row(index, name, statement, solution, make_input, split):
    rng = random.Random(f"{name}-{split}")
    tests = []
    for _ in range(3):
        stdin = make_input(rng)
        tests.append({"input": stdin, "output": run(solution, stdin), "testtype": "stdin"})
    return {
        "data_source": "lcb_sample",
        "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": statement}],
        "env_class": "lcb",
        "reward_spec": {"method": "rule", "ground_truth": json.dumps({"tests": tests, "timeout_s": 6})},
        "extra_info": {"name": name, "split": split, "index": index, "solution": solution},
    }


def main():
    splits = {"train": PROBLEMS[:9], "val": PROBLEMS[9:]}
    for split, problems in splits.items():
        with open(OUT / f"{split}.jsonl", "w") as f:
            for i, p in enumerate(problems):
                f.write(json.dumps(row(i, *p, split)) + "\n")
        print(f"{split}: {len(problems)} rows")


if __name__ == "__main__":
    main()
