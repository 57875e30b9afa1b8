#!/usr/bin/env bash
# One GPU node (8 GPUs by default, NGPU to change): bf16 training of a
# Qwen2.5-0.5B-sized random model with the sharded strategy (fsdp2) over
# c10d/NCCL, next to PyTorch FSDP2 (torch.distributed.fsdp.fully_shard per
# layer, fused AdamW, bf16 compute with fp32 masters) on batches of the same
# shape: rows per rank and the mean sequence length of skyrl's rollouts.
#
# Prints training tokens/s (forward + backward + optimizer, all ranks) and the
# per-GPU memory: skyrl's accounting of its training state, PyTorch's
# max_memory_allocated (which also holds activations and workspace).
#
# Needs: NVIDIA GPUs with driver and NCCL, network for scripts/setup (torch
# 2.13 with CUDA, LIBTORCH_USE_PYTORCH) and the CUDA headers the NCCL build of
# the c10d shim compiles against (pip nvidia-cuda-crt, nvidia-cuda-cccl).
# Usage: bench/distributed_gpu.sh [STEPS]   (default 8)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STEPS="${1:-8}"
NGPU="${NGPU:-$(nvidia-smi -L | wc -l)}"
scripts/setup --no-python-ref
# shellcheck disable=SC1091
source .deps/env.sh
"$SKYRL_PYTHON" -m pip install -q "nvidia-cuda-crt==13.0.*" "nvidia-cuda-cccl==13.0.*" transformers==4.57.1
cargo build --release -p skyrl-cli --features nccl
[ -f artifacts/plugins/string_transform.wasm ] || scripts/build-plugins string_transform
TORCHRUN="$(dirname "$SKYRL_PYTHON")/torchrun"
OUT="$(mktemp -d)"
ROWS_PER_RANK=32   # 4 prompts x 8 samples per rank and step
PROMPTS=$((4 * NGPU))

echo "[bench] skyrl: $NGPU ranks, fsdp2, bf16, $STEPS steps" >&2
"$TORCHRUN" --standalone --nnodes 1 --nproc-per-node "$NGPU" --no-python target/release/skyrl \
  train --quiet --plugin artifacts/plugins/string_transform.wasm --config configs/demo.yaml --max-steps "$STEPS" \
  trainer.strategy=fsdp2 trainer.bf16=true trainer.gradient_checkpointing=true \
  trainer.placement.policy_num_gpus_per_node="$NGPU" trainer.placement.ref_num_gpus_per_node="$NGPU" \
  trainer.algorithm.use_kl_loss=false \
  trainer.train_batch_size="$PROMPTS" trainer.policy_mini_batch_size="$PROMPTS" \
  trainer.micro_train_batch_size_per_gpu=8 trainer.micro_forward_batch_size_per_gpu=16 \
  trainer.eval_interval=-1 trainer.eval_before_train=false trainer.ckpt_interval=-1 trainer.resume_mode=none \
  trainer.max_prompt_length=64 generator.n_samples_per_prompt=8 generator.sampling_params.max_generate_length=192 \
  trainer.policy.model.init.vocab_size=151936 trainer.policy.model.init.hidden_size=896 \
  trainer.policy.model.init.intermediate_size=4864 trainer.policy.model.init.num_hidden_layers=24 \
  trainer.policy.model.init.num_attention_heads=14 trainer.policy.model.init.num_key_value_heads=2 \
  trainer.policy.model.init.max_position_embeddings=32768 trainer.policy.model.init.rope_theta=1000000.0 \
  "trainer.ckpt_path=$OUT/ckpts" "trainer.export_path=$OUT/exports" "trainer.log_path=$OUT/logs"

SEQ="$(python3 -c "
import json
rows = [json.loads(l) for l in open('$OUT/logs/metrics.jsonl')][1:]
print(round(sum(r['train/tokens'] / r['train/samples'] for r in rows) / len(rows)))")"
echo "[bench] PyTorch FSDP2: $NGPU ranks, $ROWS_PER_RANK x $SEQ tokens per rank" >&2
"$TORCHRUN" --standalone --nnodes 1 --nproc-per-node "$NGPU" bench/fsdp2_reference.py \
  --rows "$ROWS_PER_RANK" --seq "$SEQ" --micro 8 --steps "$STEPS" --checkpointing > "$OUT/reference.json"

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/logs/metrics.jsonl")][1:]
mean = lambda k: sum(r[k] for r in rows) / len(rows)
ref = json.loads(open(f"{out}/reference.json").read().strip().splitlines()[-1])
ours = mean("train/tokens_per_s")
state = sum(mean(k) for k in ("memory/parameters_mib", "memory/gradients_peak_mib", "memory/optimizer_mib"))
print(f"{'impl':<16} {'train tok/s':>12} {'GPU MiB/rank':>14}")
print(f"{'skyrl fsdp2':<16} {ours:>12.0f} {state:>14.0f}  (training state; activations not counted)")
print(f"{'pytorch fsdp2':<16} {ref['tokens_per_s']:>12.0f} {ref['peak_gpu_mib_per_rank']:>14.0f}  (max_memory_allocated)")
print(f"skyrl / pytorch throughput: {ours / ref['tokens_per_s']:.2f}x")
PY
rm -rf "$OUT"
