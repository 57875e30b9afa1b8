"""Reference side of the GRPO rollout benchmark (`cargo bench -p skyrl-model --bench rollout`).

The Rust bench writes the prompts it generates to a JSON file (a list of token-id
lists) and runs this script on the same model directory, so both sides sample the
same workload: every prompt `n` times, exactly `gen_tokens` new tokens per sample
(temperature 1, no top-k / top-p, EOS masked until the length is reached).

Backends:
- `hf` (default): transformers `model.generate(num_return_sequences=n,
  do_sample=True, max_new_tokens=gen_tokens, min_new_tokens=gen_tokens)`, prompts
  in chunks of `max_rows // n` so at most `max_rows` sequences decode together
  (the engine's `max_num_seqs`);
- `vllm`: a running `vllm serve` (OpenAI completions API), one request per
  prompt with `n` samples, all sent at once (used by bench/rollout_gpu.sh).

  OMP_WAIT_POLICY=PASSIVE python bench/rollout_hf.py --model-dir DIR --prompts P.json

Prints one JSON line: {"tokens_per_s": .., "seconds": .., ...}.
"""
import argparse
import json
import os
import time


def cpu_seconds():
    """User + system CPU seconds of this process, all threads."""
    t = os.times()
    return t.user + t.system


def run_hf(args, prompts):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dev = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=dtype).to(dev)
    model.eval()
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)
    per_call = max(1, args.max_rows // args.n)

    def gen(chunk, new_tokens):
        ids = torch.tensor(chunk, device=dev)
        with torch.no_grad():
            out = model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                temperature=1.0, top_p=1.0, top_k=0, num_return_sequences=args.n,
                max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                pad_token_id=model.config.pad_token_id or 0,
            )
        assert out.shape == (len(chunk) * args.n, ids.shape[1] + new_tokens), out.shape
        return out

    gen(prompts[:1], 4)  # warm-up: kernels, allocator
    sync()
    start, cpu = time.perf_counter(), cpu_seconds()
    for i in range(0, len(prompts), per_call):
        gen(prompts[i:i + per_call], args.gen_tokens)
    sync()
    seconds = time.perf_counter() - start
    return seconds, {
        # CPU seconds this process got / (seconds x threads): well under 1 means
        # other processes held the cores.
        "cpu_share": (cpu_seconds() - cpu) / (seconds * args.threads),
        "backend": "hf",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "prompts_per_generate_call": per_call,
    }


def run_vllm(args, prompts):
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    def post(body):
        req = urllib.request.Request(
            args.url.rstrip("/") + "/v1/completions", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=3600) as resp:
            return json.load(resp)

    def one(prompt, new_tokens):
        out = post({
            "model": args.served_model, "prompt": prompt, "n": args.n,
            "max_tokens": new_tokens, "min_tokens": new_tokens, "ignore_eos": True,
            "temperature": 1.0, "top_p": 1.0, "top_k": -1,
        })
        return out["usage"]["completion_tokens"]

    one(prompts[0], 4)  # warm-up
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        tokens = sum(pool.map(lambda p: one(p, args.gen_tokens), prompts))
    seconds = time.perf_counter() - start
    want = len(prompts) * args.n * args.gen_tokens
    assert tokens == want, f"vllm generated {tokens} tokens, expected {want}"
    return seconds, {"backend": "vllm", "url": args.url}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--prompts", required=True, help="JSON file: a list of token-id lists")
    ap.add_argument("--n", type=int, default=8, help="samples per prompt")
    ap.add_argument("--gen-tokens", type=int, default=256)
    ap.add_argument("--max-rows", type=int, default=512,
                    help="most sequences decoded together (hf: prompts per call = max_rows // n)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--backend", choices=["hf", "vllm"], default="hf")
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--served-model", default=None, help="vllm: the served model name")
    args = ap.parse_args()
    if args.served_model is None:
        args.served_model = args.model_dir
    with open(args.prompts) as f:
        prompts = json.load(f)
    run = run_hf if args.backend == "hf" else run_vllm
    seconds, info = run(args, prompts)
    tokens = len(prompts) * args.n * args.gen_tokens
    print(json.dumps({"tokens_per_s": tokens / seconds, "seconds": seconds,
                      "tokens": tokens, **info}))


if __name__ == "__main__":
    main()
