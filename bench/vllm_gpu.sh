#!/usr/bin/env bash
# vLLM as skyrl's inference engine, on a GPU machine with vLLM (not run in CI).
#
#  1. Starts `vllm serve` on a small model (Qwen2.5-0.5B-Instruct) the way
#     SkyRL runs its servers (VLLM_SERVER_DEV_MODE=1, NCCL weight transfer) and
#     walks the control protocol with curl: /get_world_size, a token-id
#     /v1/completions, /pause, /resume, /sleep, /wake_up, /reset_prefix_cache,
#     /collective_rpc reload_weights.
#  2. Trains GSM8K for STEPS steps against that server (remote_urls,
#     backend=vllm) with NCCL weight sync (vLLM's torch-store rendezvous, the
#     trainer as rank 0), then again with checkpoint sync.
#  3. Trains once more with the trainer starting `vllm serve` itself
#     (run_engines_locally=true, backend=vllm).
# Prints time/generate and time/weight_sync per run.
#
# Needs: NVIDIA GPU(s) (2+ keep the server off the trainer's GPU), network for
# scripts/setup, pip (vllm) and the model, or MODEL_DIR pointing to a local
# copy. vLLM goes into its own venv (.deps/vllm-venv) unless VLLM_PYTHON names
# a Python that already imports it.
# Usage: bench/vllm_gpu.sh [STEPS]   (default 3)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STEPS="${1:-3}"
VLLM_VERSION="${VLLM_VERSION:-0.20.2}"
PORT="${PORT:-8100}"
NGPU="$(nvidia-smi -L | wc -l)"

scripts/setup --no-python-ref
# shellcheck disable=SC1091
source .deps/env.sh
if [ -z "${VLLM_PYTHON:-}" ]; then
  if [ ! -x .deps/vllm-venv/bin/python ]; then
    python3 -m venv .deps/vllm-venv
    .deps/vllm-venv/bin/pip install -q "vllm==$VLLM_VERSION"
  fi
  VLLM_PYTHON="$ROOT/.deps/vllm-venv/bin/python"
fi
"$VLLM_PYTHON" -c "import vllm; print('[bench] vllm', vllm.__version__)" >&2
MODEL_DIR="${MODEL_DIR:-$("$VLLM_PYTHON" -c "from huggingface_hub import snapshot_download as d; print(d('Qwen/Qwen2.5-0.5B-Instruct'))")}"
cargo build --release -p skyrl-cli
[ -f artifacts/plugins/gsm8k.wasm ] || scripts/build-plugins gsm8k
OUT="$(mktemp -d)"
SERVER_GPU=0
[ "$NGPU" -ge 2 ] && SERVER_GPU=1

echo "[bench] vllm serve $MODEL_DIR on GPU $SERVER_GPU, port $PORT" >&2
CUDA_VISIBLE_DEVICES="$SERVER_GPU" VLLM_SERVER_DEV_MODE=1 "$VLLM_PYTHON" -m vllm.entrypoints.openai.api_server \
  --model "$MODEL_DIR" --served-model-name policy --host 127.0.0.1 --port "$PORT" \
  --gpu-memory-utilization 0.35 --enforce-eager --dtype bfloat16 \
  --weight-transfer-config '{"backend": "nccl"}' > "$OUT/vllm.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
URL="http://127.0.0.1:$PORT"
for _ in $(seq 600); do
  curl -sf "$URL/health" >/dev/null && break
  kill -0 $SERVER 2>/dev/null || { tail -50 "$OUT/vllm.log"; exit 1; }
  sleep 1
done

call() {  # METHOD PATH [JSON]
  printf '[bench] %s %s -> ' "$1" "$2" >&2
  curl -sS -X "$1" "$URL$2" -H 'Content-Type: application/json' ${3:+-d "$3"} -w ' (%{http_code})\n' >&2
}
call GET /get_world_size
call POST /v1/completions '{"model": "policy", "prompt": [9707, 11, 1879], "max_tokens": 4, "temperature": 0, "logprobs": 0, "return_token_ids": true}'
call POST '/pause?mode=keep&clear_cache=false'
call POST /resume
call POST '/sleep?level=1' '{"level": 1}'
call POST '/wake_up' '{}'
call POST '/reset_prefix_cache?reset_running_requests=true' '{"reset_running_requests": true}'
call POST /collective_rpc "{\"method\": \"reload_weights\", \"kwargs\": {\"weights_path\": \"$MODEL_DIR\"}}"

train() {  # NAME overrides...
  local name=$1; shift
  echo "[bench] train: $name" >&2
  target/release/skyrl train --quiet --plugin artifacts/plugins/gsm8k.wasm --config configs/gsm8k.yaml \
    --max-steps "$STEPS" \
    "data.train_data=['envs/gsm8k/data/train.jsonl']" "data.val_data=['envs/gsm8k/data/val.jsonl']" \
    "trainer.policy.model.path=$MODEL_DIR" trainer.resume_mode=none \
    trainer.train_batch_size=16 trainer.policy_mini_batch_size=16 \
    trainer.micro_train_batch_size_per_gpu=4 trainer.micro_forward_batch_size_per_gpu=8 \
    trainer.eval_before_train=false trainer.eval_interval=-1 trainer.ckpt_interval=-1 \
    generator.n_samples_per_prompt=4 generator.sampling_params.max_generate_length=256 \
    trainer.placement.colocate_all=false generator.inference_engine.backend=vllm \
    generator.inference_engine.served_model_name=policy \
    "trainer.ckpt_path=$OUT/$name/ckpts" "trainer.export_path=$OUT/$name/exports" \
    "trainer.log_path=$OUT/$name/logs" "$@"
}
EXTERNAL=(generator.inference_engine.run_engines_locally=false "generator.inference_engine.remote_urls=['$URL']")
train external_nccl "${EXTERNAL[@]}" generator.inference_engine.weight_sync_backend=nccl
train external_checkpoint "${EXTERNAL[@]}" generator.inference_engine.weight_sync_backend=checkpoint
kill $SERVER; wait $SERVER 2>/dev/null || true
SKYRL_PYTHON="$VLLM_PYTHON" train launched_nccl generator.inference_engine.weight_sync_backend=nccl \
  generator.inference_engine.gpu_memory_utilization=0.35 generator.inference_engine.max_num_seqs=64

python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
print(f"{'run':<22}{'steps':>6}{'generate s':>12}{'weight_sync s':>15}{'sync MiB':>10}{'reward':>8}")
for run in ("external_nccl", "external_checkpoint", "launched_nccl"):
    path = f"{out}/{run}/logs/metrics.jsonl"
    if not os.path.exists(path):
        print(f"{run:<22} (no metrics)")
        continue
    rows = [json.loads(l) for l in open(path)]
    mean = lambda k: sum(r.get(k, 0) for r in rows) / max(len(rows), 1)
    print(f"{run:<22}{len(rows):>6}{mean('time/generate'):>12.2f}{mean('time/weight_sync'):>15.2f}"
          f"{mean('weight_sync/bytes') / 2**20:>10.0f}{mean('reward/mean'):>8.3f}")
PY
