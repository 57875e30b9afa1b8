#!/usr/bin/env python3
"""Writes a small hand-written GSM8K-style dataset (train.jsonl, val.jsonl).

The rows follow skyrl's gsm8k preprocessing (examples/gsm8k/gsm8k_dataset.py):
the question plus the step-by-step instruction as the user prompt,
`env_class` "gsm8k", the numeric answer as `reward_spec.ground_truth` and the
worked solution in `extra_info.answer`. Every answer is computed here from the
worked steps, so the ground truth cannot disagree with the solution text.

    python3 envs/gsm8k/data/generate.py
"""

import json
import os

INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'

# (question, [(step description, python expression)]). The last step's value
# is the answer; earlier values are available to later steps as s1, s2, ...
PROBLEMS = [
    ("Mia buys 3 packs of pencils with 12 pencils in each pack. She gives 7 pencils to her brother. How many pencils does she have left?",
     [("pencils bought", "3 * 12"), ("pencils left", "s1 - 7")]),
    ("A bakery sells muffins for $2 each. On Monday it sold 45 muffins and on Tuesday it sold 38 muffins. How many dollars did it earn on the two days?",
     [("muffins sold", "45 + 38"), ("dollars earned", "s1 * 2")]),
    ("Liam reads 15 pages every day. How many pages does he read in 3 weeks?",
     [("days", "3 * 7"), ("pages", "s1 * 15")]),
    ("A farmer has 24 cows and twice as many sheep. How many animals does he have in total?",
     [("sheep", "24 * 2"), ("animals", "24 + s1")]),
    ("A train travels 60 miles per hour for 4 hours and then 45 miles per hour for 2 hours. How many miles does it travel?",
     [("first part", "60 * 4"), ("second part", "45 * 2"), ("total miles", "s1 + s2")]),
    ("Emma has $50. She spends $18 on a book and half of the remaining money on lunch. How many dollars does she have left?",
     [("after the book", "50 - 18"), ("spent on lunch", "s1 / 2"), ("left", "s1 - s2")]),
    ("A box holds 8 rows of chocolates with 6 chocolates in each row. Noah eats 5 chocolates. How many chocolates remain in the box?",
     [("chocolates", "8 * 6"), ("remaining", "s1 - 5")]),
    ("There are 28 students in a class. Each student needs 3 notebooks, and notebooks come in packs of 4. How many packs are needed?",
     [("notebooks", "28 * 3"), ("packs", "s1 / 4")]),
    ("Sophia earns $12 per hour. She works 6 hours on Saturday and 5 hours on Sunday. How many dollars does she earn?",
     [("hours", "6 + 5"), ("dollars", "s1 * 12")]),
    ("A garden is 15 meters long and 9 meters wide. A fence goes all the way around it. How many meters of fence are needed?",
     [("length plus width", "15 + 9"), ("perimeter", "2 * s1")]),
    ("Jack had 120 marbles. He lost 1/4 of them and then bought 18 more. How many marbles does he have now?",
     [("lost", "120 / 4"), ("after losing", "120 - s1"), ("now", "s2 + 18")]),
    ("A pizza is cut into 8 slices. Olivia orders 5 pizzas for a party of 13 people who each eat 3 slices. How many slices are left over?",
     [("slices", "5 * 8"), ("eaten", "13 * 3"), ("left over", "s1 - s2")]),
    ("A car uses 1 liter of fuel for every 14 kilometers. How many liters does it need for a trip of 350 kilometers?",
     [("liters", "350 / 14")]),
    ("Ava saves $7 every week. After how many weeks will she have saved enough for a $91 bike?",
     [("weeks", "91 / 7")]),
    ("A store had 250 apples. It sold 87 in the morning and 96 in the afternoon. How many apples are left?",
     [("sold", "87 + 96"), ("left", "250 - s1")]),
    ("Ethan is 4 times as old as his daughter, who is 9. How old will Ethan be in 5 years?",
     [("Ethan now", "4 * 9"), ("in 5 years", "s1 + 5")]),
    ("A school orders 14 boxes of 25 markers and 9 boxes of 40 crayons. How many writing items does it order?",
     [("markers", "14 * 25"), ("crayons", "9 * 40"), ("items", "s1 + s2")]),
    ("A movie ticket costs $11 and popcorn costs $6. How many dollars do 4 friends pay if each gets a ticket and popcorn?",
     [("per friend", "11 + 6"), ("total", "4 * s1")]),
    ("Grace runs 3 laps of a 400 meter track every morning. How many meters does she run in 5 mornings?",
     [("per morning", "3 * 400"), ("total", "5 * s1")]),
    ("A tank holds 1,200 liters of water. It leaks 35 liters per hour for 8 hours. How many liters remain?",
     [("leaked", "35 * 8"), ("remain", "1200 - s1")]),
    ("Lucas buys 6 shirts at $15 each and 2 pairs of jeans at $32 each. He pays with $200. How much change does he get in dollars?",
     [("shirts", "6 * 15"), ("jeans", "2 * 32"), ("spent", "s1 + s2"), ("change", "200 - s3")]),
    ("A library has 3 floors with 48 shelves on each floor, and each shelf holds 30 books. How many books can the library hold?",
     [("shelves", "3 * 48"), ("books", "s1 * 30")]),
    ("Chloe baked 72 cookies. She put them equally into 9 bags and gave away 4 bags. How many cookies did she keep?",
     [("per bag", "72 / 9"), ("bags kept", "9 - 4"), ("cookies kept", "s1 * s2")]),
    ("A printer prints 18 pages per minute. How many minutes does it take to print 6 copies of a 45 page report?",
     [("pages", "6 * 45"), ("minutes", "s1 / 18")]),
    ("Henry has 3 times as many stamps as Ella. Together they have 96 stamps. How many stamps does Henry have?",
     [("Ella", "96 / 4"), ("Henry", "3 * s1")]),
    ("A rectangle has a perimeter of 54 centimeters and a width of 11 centimeters. What is its area in square centimeters?",
     [("length", "54 / 2 - 11"), ("area", "s1 * 11")]),
    ("A zoo gets 1,350 visitors on Saturday, 980 on Sunday and 415 on each of the other five days. How many visitors does it get in the week?",
     [("weekend", "1350 + 980"), ("weekdays", "5 * 415"), ("week", "s1 + s2")]),
    ("Isabella's plant grows 2 centimeters every 3 days. It is 10 centimeters tall today. How tall will it be in 30 days?",
     [("growth", "30 / 3 * 2"), ("height", "10 + s1")]),
    ("A shop sells a $80 jacket at a 25% discount. How many dollars does the jacket cost after the discount?",
     [("discount", "80 * 25 / 100"), ("price", "80 - s1")]),
    ("Daniel drives 42 kilometers to work and back home every weekday. How many kilometers does he drive for work in 4 weeks?",
     [("per day", "42 * 2"), ("days", "5 * 4"), ("kilometers", "s1 * s2")]),
]

VAL_EVERY = 6  # every 6th problem goes to the validation split


def number(x):
    if isinstance(x, float):
        if not x.is_integer():
            raise ValueError(f"answer {x} is not a whole number")
        x = int(x)
    return x


def solve(steps):
    values = {}
    lines = []
    for i, (what, expr) in enumerate(steps, start=1):
        value = number(eval(expr, {}, values))  # expressions are the literals above
        values[f"s{i}"] = value
        shown = expr
        for k in sorted(values, reverse=True):
            shown = shown.replace(k, str(values[k]))
        lines.append(f"{what[0].upper()}{what[1:]}: {shown} = {value}.")
    answer = values[f"s{len(steps)}"]
    return "\n".join(lines) + f"\n#### {answer}", str(answer)


def main():
    out = os.path.dirname(os.path.abspath(__file__))
    splits = {"train": [], "val": []}
    for i, (question, steps) in enumerate(PROBLEMS):
        solution, answer = solve(steps)
        split = "val" if i % VAL_EVERY == VAL_EVERY - 1 else "train"
        splits[split].append({
            "data_source": "handwritten/gsm8k-style",
            "prompt": [{"role": "user", "content": f"{question} {INSTRUCTION}"}],
            "env_class": "gsm8k",
            "reward_spec": {"method": "rule", "ground_truth": answer},
            "extra_info": {"split": split, "index": len(splits[split]), "answer": solution, "question": question},
        })
    for split, rows in splits.items():
        path = os.path.join(out, f"{split}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        print(f"wrote {len(rows)} rows to {path}")


if __name__ == "__main__":
    main()
