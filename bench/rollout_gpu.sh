#!/usr/bin/env bash
# GRPO rollout on one GPU: `vllm serve` against skyrl's built-in engine, same
# model, same prompts, same sampling (temperature 1, n samples per prompt, EOS
# ignored so every sample runs the full length). Not run on the 2-core dev VM.
#
#   MODEL=/models/Qwen2.5-0.5B-Instruct bench/rollout_gpu.sh
#   MODEL=... DTYPE=bfloat16 bench/rollout_gpu.sh --prompts 256 --n 8 --gen-tokens 1024
#
# Needs a CUDA build of libtorch for the Rust side (LIBTORCH, or .deps/env.sh) and,
# for the vLLM side, `vllm` on PATH (skipped with a note otherwise). Flags go to
# the rollout bench (host/model/benches/rollout; defaults 64 prompts x 8 samples,
# 128-token prompts, 256 new tokens, max_num_seqs 64 and prompts x n). The bench also
# runs HF transformers' generate on the GPU unless --no-hf is given.
# Results: $OUT/skyrl.json, $OUT/vllm.json, $OUT/report.txt (default target/rollout-gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .deps/env.sh ]; then
    # shellcheck disable=SC1091
    source .deps/env.sh
fi
MODEL=${MODEL:?set MODEL to a Hugging Face model directory}
DTYPE=${DTYPE:-bfloat16}
PORT=${PORT:-8000}
OUT=${OUT:-target/rollout-gpu}
PY=${SKYRL_PYTHON:-python3}
mkdir -p "$OUT"
# cargo bench runs the bench in host/model: absolute paths.
OUT=$(cd "$OUT" && pwd)
if [ -d "$MODEL" ]; then MODEL=$(cd "$MODEL" && pwd); fi

# 1. skyrl on CUDA (paged engine, old static engine, HF generate); writes the prompts.
cargo bench -p skyrl-model --bench rollout -- --model-dir "$MODEL" --device cuda \
    --dtype "$DTYPE" --skip-mixed --python "$PY" --prompts-out "$OUT/prompts.json" \
    --json-out "$OUT/skyrl.json" "$@" | tee "$OUT/report.txt"

read -r N GEN ROWS < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["sizes"]
print(s["n"], s["gen_tokens"], max(s["max_num_seqs"]))' "$OUT/skyrl.json")

# 2. vllm serve with the same dtype, batch cap and prefix caching.
if command -v vllm >/dev/null; then
    vllm serve "$MODEL" --dtype "$DTYPE" --port "$PORT" --max-num-seqs "$ROWS" \
        --enable-prefix-caching --seed 0 >"$OUT/vllm-serve.log" 2>&1 &
    VLLM_PID=$!
    trap 'kill "$VLLM_PID" 2>/dev/null || true' EXIT
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
        kill -0 "$VLLM_PID" 2>/dev/null || { cat "$OUT/vllm-serve.log"; exit 1; }
        sleep 1
    done
    "$PY" bench/rollout_hf.py --backend vllm --url "http://127.0.0.1:$PORT" \
        --served-model "$MODEL" --model-dir "$MODEL" --prompts "$OUT/prompts.json" \
        --n "$N" --gen-tokens "$GEN" >"$OUT/vllm.json"
    kill "$VLLM_PID"
    wait "$VLLM_PID" 2>/dev/null || true
else
    echo "vllm not on PATH: skipping the vLLM side" | tee -a "$OUT/report.txt"
fi

# 3. Side by side.
python3 - "$OUT/skyrl.json" "$OUT/vllm.json" <<'EOF' | tee -a "$OUT/report.txt"
import json, os, sys

doc = json.load(open(sys.argv[1]))
# The run with the largest batch cap: the one vllm serve gets (--max-num-seqs).
g = max(doc["results"][0]["grpo"], key=lambda g: g["max_num_seqs"])
rows = [("skyrl paged", g["paged"]["tokens_per_s"])]
if g.get("static_batch"):
    rows.append(("skyrl static (old)", g["static_batch"]["tokens_per_s"]))
if g.get("hf"):
    rows.append(("HF generate", g["hf"]["tokens_per_s"]))
if os.path.exists(sys.argv[2]):
    rows.append(("vllm serve", json.load(open(sys.argv[2]))["tokens_per_s"]))
paged = rows[0][1]
print(f"\nGRPO rollout on {doc['device']} ({doc['dtype']}): {g['rows']} sequences x "
      f"{g['gen_tokens']} tokens, max_num_seqs {g['max_num_seqs']}")
for name, tps in rows:
    print(f"  {name:<20} {tps:>12.0f} tok/s   paged / this {paged / tps:.2f}x")
EOF
