#!/usr/bin/env bash
# Data-parallel training on CPU over c10d/Gloo, side by side in one run:
# 1 rank, 2 ranks with `ddp`, 2 ranks with the sharded strategy (`fsdp2`).
# Every rank uses one torch thread (OMP_NUM_THREADS=1), so 2 ranks use 2 cores.
#
# Prints, per run (rank 0's view, mean over the steps after the first):
#   - training tokens/s (prompt + response tokens of the whole batch / the
#     slowest rank's `time/train`) and the scaling efficiency against 1 rank;
#   - per-rank memory of parameters, gradients (peak and between steps) and
#     optimizer state, from the trainer's own accounting.
#
# Usage: bench/distributed.sh [STEPS]   (default 10; about 30 s on 2 cores)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STEPS="${1:-10}"
# shellcheck disable=SC1091
source .deps/env.sh
SKYRL="$ROOT/target/release/skyrl"
[ -x "$SKYRL" ] || cargo build --release -p skyrl-cli
PLUGIN="$ROOT/artifacts/plugins/string_transform.wasm"
[ -f "$PLUGIN" ] || scripts/build-plugins string_transform
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
export OMP_NUM_THREADS=1

# A 3.2M-parameter Qwen2-style model: 4 layers, hidden 256, MLP 768.
common=(
  train --quiet --plugin "$PLUGIN" --config configs/demo.yaml --max-steps "$STEPS"
  trainer.train_batch_size=8 trainer.policy_mini_batch_size=8
  trainer.micro_train_batch_size_per_gpu=8 trainer.micro_forward_batch_size_per_gpu=16
  trainer.eval_interval=-1 trainer.eval_before_train=false trainer.ckpt_interval=-1
  trainer.resume_mode=none trainer.max_prompt_length=64
  trainer.policy.model.init.hidden_size=256 trainer.policy.model.init.intermediate_size=768
  trainer.policy.model.init.num_hidden_layers=4 trainer.policy.model.init.num_attention_heads=4
  trainer.policy.model.init.num_key_value_heads=2
  generator.n_samples_per_prompt=4 generator.sampling_params.max_generate_length=24
)

run() { # NAME WORLD STRATEGY
  local name=$1 world=$2 strategy=$3 dir="$OUT/$1"
  local args=("${common[@]}" "trainer.strategy=$strategy"
    "trainer.placement.policy_num_gpus_per_node=$world" "trainer.placement.ref_num_gpus_per_node=$world"
    "trainer.ckpt_path=$dir/ckpts" "trainer.export_path=$dir/exports" "trainer.log_path=$dir/logs")
  if [ "$world" = 1 ]; then
    "$SKYRL" "${args[@]}" >"$OUT/$name.log" 2>&1
  else
    "$ROOT/.deps/venv/bin/torchrun" --standalone --nnodes 1 --nproc-per-node "$world" --no-python \
      "$SKYRL" "${args[@]}" >"$OUT/$name.log" 2>&1
  fi || { echo "run $name failed:"; tail -20 "$OUT/$name.log"; exit 1; }
}

echo "[bench] $STEPS steps x 8 prompts x 4 samples, 3.2M-parameter model, fp32, 1 torch thread per rank" >&2
run one 1 ddp
run ddp 2 ddp
run fsdp 2 fsdp2

python3 - "$OUT" <<'EOF'
import json, sys, statistics
out = sys.argv[1]
def load(name):
    rows = [json.loads(l) for l in open(f"{out}/{name}/logs/metrics.jsonl")]
    return rows[1:] if len(rows) > 1 else rows   # the first step warms up
def mean(rows, key):
    return statistics.mean(r[key] for r in rows)
runs = [("1 rank", "one"), ("2 ranks, ddp", "ddp"), ("2 ranks, fsdp2", "fsdp")]
data = {n: load(n) for _, n in runs}
base = mean(data["one"], "train/tokens_per_s")
print(f"{'run':<16} {'train tok/s':>11} {'scaling':>8} {'efficiency':>10} {'params MiB':>10} {'grads peak':>10} {'grads rest':>10} {'optim MiB':>9} {'peak MiB':>9}")
for label, n in runs:
    r = data[n]
    tps = mean(r, "train/tokens_per_s")
    world = 1 if n == "one" else 2
    p, gp, gr, o = (mean(r, k) for k in ("memory/parameters_mib", "memory/gradients_peak_mib",
                                         "memory/gradients_at_rest_mib", "memory/optimizer_mib"))
    print(f"{label:<16} {tps:>11.0f} {tps/base:>7.2f}x {tps/base/world:>9.0%} {p:>10.1f} {gp:>10.1f} {gr:>10.1f} {o:>9.1f} {p+gp+o:>9.1f}")
d, f = data["ddp"], data["fsdp"]
print(f"fsdp2 / ddp at 2 ranks: optimizer state {mean(f,'memory/optimizer_mib')/mean(d,'memory/optimizer_mib'):.2f}x, "
      f"gradients between steps {mean(f,'memory/gradients_at_rest_mib')/mean(d,'memory/gradients_at_rest_mib'):.2f}x, "
      f"peak {sum(mean(f,k) for k in ('memory/parameters_mib','memory/gradients_peak_mib','memory/optimizer_mib'))/sum(mean(d,k) for k in ('memory/parameters_mib','memory/gradients_peak_mib','memory/optimizer_mib')):.2f}x, "
      f"throughput {mean(f,'train/tokens_per_s')/mean(d,'train/tokens_per_s'):.2f}x")
losses = [[round(x["loss"], 6) for x in data[n]] for _, n in runs]
print("per-step losses (1 rank / ddp / fsdp2):", *losses, sep="\n  ")
EOF
