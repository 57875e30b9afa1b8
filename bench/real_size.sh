#!/usr/bin/env bash
# Real-size CPU benchmarks, skyrl (Rust) side by side with PyTorch/transformers on the
# same random-init Qwen2 checkpoints, printing Rust/PyTorch ratios (>1: Rust faster):
# generation tok/s at batch 8 and 128, forward+backward tok/s, a full training step
# (fwd+bwd+clip+AdamW) against torch.optim.AdamW single-tensor and fused, and the peak
# RSS of every process. See bench/README.md ("Real model sizes").
#
#   bench/real_size.sh [--with-500m | --only-500m] [--iters N] [--threads N]
#
# Env: PROMPT_LEN, GEN_TOKENS (32 each), TRAIN_BATCH (8), TRAIN_SEQ_LEN (128), ITERS
# (timed iterations per measurement, 2), THREADS (1), SKYRL_PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

WITH_500M=0
ONLY_500M=0
ITERS=${ITERS:-2}
THREADS=${THREADS:-1}
while [ $# -gt 0 ]; do
    case "$1" in
        --with-500m) WITH_500M=1 ;;
        --only-500m) ONLY_500M=1 ;;
        --iters) ITERS=$2; shift ;;
        --threads) THREADS=$2; shift ;;
        -h|--help) sed -n 2,12p "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done
PROMPT_LEN=${PROMPT_LEN:-32}
GEN_TOKENS=${GEN_TOKENS:-32}
TRAIN_BATCH=${TRAIN_BATCH:-8}
TRAIN_SEQ_LEN=${TRAIN_SEQ_LEN:-128}
PY=${SKYRL_PYTHON:-$ROOT/.deps/venv/bin/python}
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS

echo "building skyrl-model-bench and the full_step bench..." >&2
cargo build -q --release -p skyrl-model --bin skyrl-model-bench
cargo bench -q -p skyrl-train --bench full_step --no-run
MODEL_BENCH=$ROOT/target/release/skyrl-model-bench

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
RESULTS=$TMP/results.jsonl

# json_line TAG: echo stdin, then record its `result-json` line, tagged, in $RESULTS.
json_line() {
    local line
    tee "$TMP/last.out"
    line=$(sed -n 's/^result-json //p' "$TMP/last.out" | tail -1)
    if [ -z "$line" ]; then echo "no result line for $1" >&2; exit 1; fi
    printf '{"tag": "%s", "data": %s}\n' "$1" "$line" >>"$RESULTS"
}
# json_last TAG: the same with the last line of stdin (the Python scripts' JSON).
json_last() {
    tee "$TMP/last.out"
    printf '{"tag": "%s", "data": %s}\n' "$1" "$(tail -1 "$TMP/last.out")" >>"$RESULTS"
}

SIZES=(100m)
[ "$WITH_500M" = 1 ] && SIZES+=(500m)
[ "$ONLY_500M" = 1 ] && SIZES=(500m)
for size in "${SIZES[@]}"; do
    dir=$TMP/$size
    echo "== $size: writing the random-init checkpoint" >&2
    params=$("$PY" bench/real_size_model.py "$size" "$dir" | tail -1)
    printf '{"tag": "%s/params", "data": %s}\n' "$size" "$params" >>"$RESULTS"

    echo "== $size: generate batch 8 + forward/backward (skyrl-model-bench)" >&2
    "$MODEL_BENCH" --model-dir "$dir" --threads "$THREADS" --iters "$ITERS" \
        --batch 8 --prompt-len "$PROMPT_LEN" --gen-tokens "$GEN_TOKENS" \
        --train-batch "$TRAIN_BATCH" --train-seq-len "$TRAIN_SEQ_LEN" --python "$PY" \
        | json_line "$size/b8"

    echo "== $size: generate batch 128 (skyrl-model-bench)" >&2
    "$MODEL_BENCH" --model-dir "$dir" --threads "$THREADS" --iters "$ITERS" \
        --batch 128 --prompt-len "$PROMPT_LEN" --gen-tokens "$GEN_TOKENS" \
        --train-batch 0 --python "$PY" \
        | json_line "$size/b128"

    echo "== $size: full step, Rust (skyrl_train::optim::AdamW)" >&2
    cargo bench -q -p skyrl-train --bench full_step -- --model-dir "$dir" \
        --batch "$TRAIN_BATCH" --seq-len "$TRAIN_SEQ_LEN" --iters "$ITERS" --threads "$THREADS" \
        | json_line "$size/step_rust"
    for impl in single fused; do
        echo "== $size: full step, PyTorch (torch.optim.AdamW $impl)" >&2
        "$PY" bench/full_step_torch.py --model-dir "$dir" --impl "$impl" \
            --batch "$TRAIN_BATCH" --seq-len "$TRAIN_SEQ_LEN" --iters "$ITERS" --threads "$THREADS" \
            | json_last "$size/step_torch_$impl"
    done
    rm -rf "$dir"
done

NPROC=$(getconf _NPROCESSORS_ONLN) # not nproc: it honours OMP_NUM_THREADS
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
"$PY" - "$RESULTS" "$NPROC" "$CPU" "$THREADS" "$ITERS" "$PROMPT_LEN" "$GEN_TOKENS" \
    "$TRAIN_BATCH" "$TRAIN_SEQ_LEN" <<'PYEOF'
import json, os, sys

path, nproc, cpu, threads, iters, plen, gen, tb, tl = sys.argv[1:]
r = {}
for line in open(path):
    j = json.loads(line)
    r[j["tag"]] = j["data"]
load = os.getloadavg()
print()
print(f"machine: {nproc} CPUs ({cpu}), load average {load[0]:.1f} / {load[1]:.1f}; "
      f"{threads} torch thread(s) per side, OMP_WAIT_POLICY=PASSIVE, fp32, {iters} timed iterations")
print(f"generate: {plen} prompt + {gen} new tokens per row (sampled, no prefix sharing); "
      f"train: {tb} x {tl} tokens")
print()
print("| model | measurement | Rust | PyTorch | Rust/PyTorch |")
print("|---|---|---|---|---|")
sizes = [s for s in ("100m", "500m") if f"{s}/b8" in r]
for s in sizes:
    name = f"{s} ({r[f'{s}/params'] / 1e6:.1f}M)"
    b8, b128 = r[f"{s}/b8"], r[f"{s}/b128"]
    sr, ss, sf = r[f"{s}/step_rust"], r[f"{s}/step_torch_single"], r[f"{s}/step_torch_fused"]
    rows = [
        ("generate tok/s, batch 8", b8["rust"]["gen_tokens_per_s"], b8["python"]["gen_tokens_per_s"], True),
        ("generate tok/s, batch 128", b128["rust"]["gen_tokens_per_s"], b128["python"]["gen_tokens_per_s"], True),
        ("fwd+bwd tok/s", b8["rust"]["train_tokens_per_s"], b8["python"]["train_tokens_per_s"], True),
        ("full step tok/s vs AdamW single-tensor", sr["tokens_per_s"], ss["tokens_per_s"], True),
        ("full step tok/s vs AdamW fused", sr["tokens_per_s"], sf["tokens_per_s"], True),
        ("  full step s/step (single)", sr["seconds_per_step"], ss["seconds_per_step"], False),
        ("  of which clip+AdamW s (single)", sr["optimizer_seconds"], ss["optimizer_seconds"], False),
        ("  of which clip+AdamW s (fused)", sr["optimizer_seconds"], sf["optimizer_seconds"], False),
        ("peak RSS MiB, gen b8 + fwd/bwd", b8["rust"]["peak_rss_mib"], b8["python"]["peak_rss_mib"], False),
        ("peak RSS MiB, gen b128", b128["rust"]["peak_rss_mib"], b128["python"]["peak_rss_mib"], False),
        ("peak RSS MiB, full step (single)", sr["peak_rss_mib"], ss["peak_rss_mib"], False),
        ("peak RSS MiB, full step (fused)", sr["peak_rss_mib"], sf["peak_rss_mib"], False),
    ]
    for label, rust, torch_, faster in rows:
        # throughput rows: Rust/PyTorch (>1: Rust faster); seconds: PyTorch/Rust (>1: Rust faster);
        # RSS: Rust/PyTorch (<1: Rust uses less)
        if label.startswith("peak"):
            ratio = f"{rust / torch_:.2f}x (mem)"
        elif faster:
            ratio = f"{rust / torch_:.2f}x"
        else:
            ratio = f"{torch_ / rust:.2f}x"
        fmt = (lambda v: f"{v:.3f}") if "s/step" in label or "AdamW s (" in label else (lambda v: f"{v:.1f}")
        print(f"| {name} | {label} | {fmt(rust)} | {fmt(torch_)} | {ratio} |")
print()
print("ratios: throughput Rust/PyTorch and seconds PyTorch/Rust (>1: Rust faster); "
      "peak RSS Rust/PyTorch (mem; <1: Rust uses less). Every side is its own process.")
PYEOF
