"""PyTorch side of the full-step benchmark (`host/train/benches/full_step.rs`,
run side by side by `bench/real_size.sh`).

One training step on an HF checkpoint: forward, loss = -mean next-token
log-prob over `--batch` x `--seq-len` random token ids, backward,
`clip_grad_norm_(params, 1.0)`, `torch.optim.AdamW.step()` (lr 1e-5, betas
0.9/0.999, eps 1e-8, weight decay 0.01), `zero_grad`. One untimed step (state
allocation), then `--iters` timed; the median is printed. `--impl single`
(foreach=False, the CPU default), `foreach` or `fused` picks the AdamW
implementation; run one per process so each peak RSS is its own.

Prints one JSON line: {"seconds_per_step", "tokens_per_s", "fwd_bwd_seconds",
"optimizer_seconds", "peak_rss_mib", ...}.
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM

from model_bench import peak_rss_mib  # bench/ is this script's directory


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--impl", choices=["single", "foreach", "fused"], default="single")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, torch_dtype=torch.float32)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    kw = {"single": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}[args.impl]
    opt = torch.optim.AdamW(params, lr=1e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, **kw)
    vocab = model.config.vocab_size
    ids = torch.randint(3, vocab, (args.batch, args.seq_len))
    am = torch.ones_like(ids)
    pos = am.cumsum(-1) - 1

    def step():
        t = time.perf_counter()
        logits = model(input_ids=ids, attention_mask=am, position_ids=pos).logits.float()
        logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
        loss = -logp.mean()
        loss.backward()
        fwd_bwd = time.perf_counter() - t
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return fwd_bwd, time.perf_counter() - t

    step()
    runs = [step() for _ in range(args.iters)]
    fb = statistics.median(r[0] for r in runs)
    total = statistics.median(r[1] for r in runs)
    tokens = args.batch * args.seq_len
    print(json.dumps({
        "impl": args.impl,
        "seconds_per_step": total,
        "tokens_per_s": tokens / total,
        "fwd_bwd_seconds": fb,
        "optimizer_seconds": total - fb,
        "peak_rss_mib": peak_rss_mib(),
        "params": sum(p.numel() for p in params),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
