"""Writes SkyRL-style dataset rows with pyarrow, once per Parquet codec, for
host/train/tests/parquet_codecs.rs.

Usage: skyrl_parquet.py OUT_DIR

The rows follow SkyRL's example prep scripts (examples/gsm8k/gsm8k_dataset.py):
data_source, prompt (a list of {role, content} chat messages), env_class,
reward_spec {method, ground_truth}, extra_info {...}, written the way
`datasets.Dataset.to_parquet` does (pyarrow, nested list<struct> and struct
columns). Writes OUT_DIR/<name>.parquet for each entry of CODECS and
OUT_DIR/rows.json: the rows as pyarrow reads them back (the expected rows).
"""
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq

# name -> write_table options
CODECS = {
    "snappy": {"compression": "snappy"},
    "zstd": {"compression": "zstd"},
    "gzip": {"compression": "gzip"},
    "lz4": {"compression": "lz4"},
    "brotli": {"compression": "brotli"},
    "none": {"compression": "none"},
    # Data page v2 and no dictionary, as other writers produce.
    "zstd_v2": {"compression": "zstd", "data_page_version": "2.0", "use_dictionary": False},
}


def rows():
    out = []
    for i in range(7):
        question = f"Natalia sold {48 + i} clips in April and half as many in May. How many in total?"
        prompt = [{"role": "user", "content": question + " Let's think step by step and output the final answer after \"####\"."}]
        if i % 3 == 0:
            prompt.insert(0, {"role": "system", "content": "Think step by step. ünïcødé ✓ 数学"})
        if i == 4:
            # A long message spanning several data pages.
            prompt.append({"role": "assistant", "content": "x" * 300_000})
            prompt.append({"role": "user", "content": ""})
        out.append({
            "data_source": "openai/gsm8k",
            "prompt": prompt,
            "env_class": None if i == 2 else "gsm8k",
            "reward_spec": {"method": "rule", "ground_truth": str(72 + i)},
            "extra_info": {
                "split": "train",
                "index": i,
                "answer": f"{48 + i} / 2 = {24 + i / 2}\n#### {72 + i}",
                "question": question,
                "difficulty": 0.25 * i,
                "verified": i % 2 == 0,
            },
        })
    return out


def main():
    out_dir = sys.argv[1]
    table = pa.Table.from_pylist(rows())
    for name, opts in CODECS.items():
        path = os.path.join(out_dir, f"{name}.parquet")
        pq.write_table(table, path, row_group_size=3, **opts)
    expected = pq.read_table(os.path.join(out_dir, "none.parquet")).to_pylist()
    with open(os.path.join(out_dir, "rows.json"), "w") as f:
        json.dump(expected, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
