"""PyTorch FSDP2 reference for bench/distributed_gpu.sh: the training half of
an RL step (forward, backward, AdamW step) of a random-init Qwen2 model in
bf16, sharded with torch.distributed.fsdp.fully_shard per decoder layer and at
the root, on random token batches of a given shape. Prints one JSON line from
rank 0: tokens/s over the timed steps and the peak GPU memory per rank.

Run under torchrun, e.g.
  torchrun --standalone --nproc-per-node 8 bench/fsdp2_reference.py --rows 32 --seq 256
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import Qwen2Config, Qwen2ForCausalLM


def qwen2_05b(vocab: int) -> Qwen2Config:
    """Qwen2.5-0.5B's shape (random weights)."""
    return Qwen2Config(
        vocab_size=vocab,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=32, help="sequences per rank per step")
    ap.add_argument("--seq", type=int, default=256, help="tokens per sequence")
    ap.add_argument("--micro", type=int, default=8, help="sequences per forward/backward")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--checkpointing", action="store_true", help="activation checkpointing per layer")
    args = ap.parse_args()

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    torch.manual_seed(0)

    with torch.device("cuda"):
        model = Qwen2ForCausalLM(qwen2_05b(args.vocab))
    n_params = sum(p.numel() for p in model.parameters())
    if args.checkpointing:
        model.gradient_checkpointing_enable()
    # bf16 compute, fp32 master parameters and optimizer state (skyrl's bf16 setup).
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01, fused=True)

    ids = torch.randint(0, args.vocab, (args.rows, args.seq), device="cuda")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for s in range(0, args.rows, args.micro):
            batch = ids[s : s + args.micro]
            logits = model(input_ids=batch).logits.float()
            logp = torch.log_softmax(logits[:, :-1], dim=-1)
            loss = -logp.gather(-1, batch[:, 1:, None]).mean() * (batch.shape[0] / args.rows)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    step()  # warm-up
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    secs = time.perf_counter() - start
    tokens = args.rows * args.seq * world * args.steps
    peak = torch.tensor([torch.cuda.max_memory_allocated()], device="cuda")
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({
            "impl": "pytorch-fsdp2",
            "world": world,
            "params": n_params,
            "rows_per_rank": args.rows,
            "seq": args.seq,
            "tokens_per_s": tokens / secs,
            "peak_gpu_mib_per_rank": peak.item() / 2**20,
        }))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
