#!/usr/bin/env bash
# GRPO rollout and mixed-length serving benchmark of the built-in engine (issue 20).
#
#   bench/rollout.sh            # tiny + small, full sizes (about 15 min on 2 cores)
#   bench/rollout.sh --quick    # smoke run, under a minute after the build
#   THREADS=1 bench/rollout.sh --sizes small --arrival-rate 4
#
# Builds and runs `cargo bench -p skyrl-model --bench rollout` (host/model/benches/rollout),
# which measures, on the same random-init weights (fp32, CPU):
#   - GRPO: the paged engine, the old static-batch engine, and HF transformers'
#     model.generate(num_return_sequences=n) via bench/rollout_hf.py;
#   - mixed lengths: continuous batching vs the old server's batching.
# Every side uses $THREADS torch threads (default 2, both cores), OMP_WAIT_POLICY=PASSIVE.
# Flags are passed to the bench (see `--help`). Results: $OUT/report.txt and
# $OUT/results.json (default target/rollout-bench); the ratios are printed at the
# end as a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .deps/env.sh ]; then
    # shellcheck disable=SC1091
    source .deps/env.sh
fi
THREADS=${THREADS:-2}
OUT=${OUT:-target/rollout-bench}
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE
PY_ARGS=()
if [ -n "${SKYRL_PYTHON:-}" ]; then
    PY_ARGS=(--python "$SKYRL_PYTHON")
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # cargo bench runs the bench in host/model

cargo bench -p skyrl-model --bench rollout --no-run
cargo bench -p skyrl-model --bench rollout -- \
    --threads "$THREADS" "${PY_ARGS[@]}" --json-out "$OUT/results.json" "$@" | tee "$OUT/report.txt"

python3 - "$OUT/results.json" <<'EOF'
import json, sys

doc = json.load(open(sys.argv[1]))
s = doc["sizes"]
print(f"\n{doc['threads']} threads, {doc['device']}, {doc['dtype']}")
print(f"GRPO: {s['prompts']} prompts x {s['n']} samples, {s['prompt_len']}-token prompts, "
      f"{s['gen_tokens']} new tokens\n")
print("| model | max_num_seqs | paged tok/s | static tok/s | HF tok/s | paged / HF | paged / static | prefill saved |")
print("|---|---|---|---|---|---|---|---|")
fmt = lambda v: "-" if v is None else f"{v:.0f}"
div = lambda a, b: "-" if a is None or b is None else f"{a / b:.2f}x"
for r, g in ((r, g) for r in doc["results"] for g in r["grpo"]):
    paged = g["paged"]["tokens_per_s"]
    stat = (g.get("static_batch") or {}).get("tokens_per_s")
    hf = (g.get("hf") or {}).get("tokens_per_s")
    total = g["prefill_tokens_computed"] + g["prefill_tokens_reused"]
    saved = 100.0 * g["prefill_tokens_reused"] / max(total, 1)
    print(f"| {r['model']} | {g['max_num_seqs']} | {fmt(paged)} | {fmt(stat)} | {fmt(hf)} | {div(paged, hf)} | "
          f"{div(paged, stat)} | {saved:.1f}% |")
arrival = (f"Poisson {doc['arrival_rate']} req/s" if doc["arrival_rate"] > 0
           else "all at t=0")
print(f"\nmixed: {s['mixed_requests']} requests, max_tokens U[{s['mixed_min_tokens']}, "
      f"{s['mixed_max_tokens']}], max_num_seqs {s['mixed_max_num_seqs']}, {arrival}\n")
print("| model | schedule | seconds | tok/s | p50 s | p99 s | tok/s vs old server |")
print("|---|---|---|---|---|---|---|")
for r in doc["results"]:
    m = r.get("mixed")
    if not m:
        continue
    old = next((o for o in m["outcomes"] if o["schedule"].startswith("old")), None)
    for o in m["outcomes"]:
        print(f"| {r['model']} | {o['schedule']} | {o['seconds']:.2f} | {o['tokens_per_s']:.0f} | "
              f"{o['p50_s']:.2f} | {o['p99_s']:.2f} | "
              f"{div(o['tokens_per_s'], old and old['tokens_per_s'])} |")
EOF
