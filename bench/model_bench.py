"""PyTorch / transformers side of the skyrl-model benchmark.

Run by `skyrl-model-bench` (host/model) on the same checkpoint and shapes, so the
Rust engine and HF transformers are measured side by side; can also run alone:

  OMP_WAIT_POLICY=PASSIVE python bench/model_bench.py --model-dir DIR [--device cpu]

Prints one JSON line: {"gen_tokens_per_s": .., "train_tokens_per_s": .., "peak_rss_mib": .., ...}
(peak_rss_mib: this process's VmHWM; --train-batch 0 skips training).
With --load-reps N it only times `AutoModelForCausalLM.from_pretrained` (fp32, CPU)
N times and prints {"load_seconds": <fastest>, "load_all": [...], "load_read_seconds": ..}
(load_read: the load plus one read of every parameter, which pages in lazily mapped weights).
"""
import argparse
import json
import resource
import time

import torch
from transformers import AutoModelForCausalLM


def peak_rss_mib():
    """Peak resident set of this process in MiB: VmHWM of /proc/self/status. Not
    ru_maxrss, which on Linux keeps the parent's peak at the fork across exec (this
    script runs as a child of the Rust bench)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--train-batch", type=int, default=8)
    ap.add_argument("--train-seq-len", type=int, default=128)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--load-reps", type=int, default=0)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    if args.load_reps > 0:
        times, read_times = [], []
        for _ in range(args.load_reps):
            t = time.perf_counter()
            model = AutoModelForCausalLM.from_pretrained(args.model_dir, torch_dtype=torch.float32)
            times.append(time.perf_counter() - t)
            with torch.no_grad():
                total = sum(float(p.sum()) for p in model.parameters())
            read_times.append(time.perf_counter() - t)
            del model
        print(json.dumps({"load_seconds": min(times), "load_all": times,
                          "load_read_seconds": min(read_times), "checksum": total,
                          "torch": torch.__version__}))
        return
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    dev = torch.device(args.device)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, torch_dtype=dtype).to(dev)
    vocab = model.config.vocab_size
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)

    # Generation: sampling at temperature 1, exactly gen_tokens new tokens per row.
    model.eval()
    prompts = torch.randint(3, vocab, (args.batch, args.prompt_len), device=dev)
    mask = torch.ones_like(prompts)

    def gen():
        with torch.no_grad():
            return model.generate(
                input_ids=prompts, attention_mask=mask, do_sample=True, temperature=1.0,
                top_p=1.0, top_k=0, max_new_tokens=args.gen_tokens,
                min_new_tokens=args.gen_tokens, pad_token_id=0,
            )

    gen()
    sync()
    t = time.perf_counter()
    for _ in range(args.iters):
        out = gen()
    sync()
    gen_s = (time.perf_counter() - t) / args.iters
    assert out.shape[1] == args.prompt_len + args.gen_tokens

    gen_tok_s = args.batch * args.gen_tokens / gen_s
    if args.train_batch == 0:
        print(json.dumps({"gen_tokens_per_s": gen_tok_s, "gen_seconds": gen_s,
                          "train_tokens_per_s": None, "peak_rss_mib": peak_rss_mib(),
                          "torch": torch.__version__}))
        return

    # Training: forward + backward of the mean next-token log-prob.
    model.train()
    ids = torch.randint(3, vocab, (args.train_batch, args.train_seq_len), device=dev)
    am = torch.ones_like(ids)
    pos = am.cumsum(-1) - 1

    def step():
        logits = model(input_ids=ids, attention_mask=am, position_ids=pos).logits.float()
        logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
        loss = -logp.mean()
        loss.backward()
        model.zero_grad(set_to_none=True)

    step()
    sync()
    t = time.perf_counter()
    for _ in range(args.iters):
        step()
    sync()
    train_s = (time.perf_counter() - t) / args.iters

    print(json.dumps({
        "gen_tokens_per_s": gen_tok_s,
        "gen_seconds": gen_s,
        "train_tokens_per_s": args.train_batch * args.train_seq_len / train_s,
        "train_seconds": train_s,
        "peak_rss_mib": peak_rss_mib(),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
