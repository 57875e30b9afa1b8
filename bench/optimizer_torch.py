"""PyTorch side of the optimizer bench (host/train/benches/optimizer.rs).

Times one optimizer step, clip_grad_norm_(params, 1.0) + AdamW.step(), on
fp32 parameters of the given shapes with fixed random gradients, for
torch.optim.AdamW's three implementations: single-tensor (foreach=False, the
CPU default), foreach=True and fused=True.

Usage: optimizer_torch.py SHAPES.json ITERS THREADS
Prints one JSON line: {"single": s, "foreach": s, "fused": s} (median seconds).
"""
import json
import statistics
import sys
import time

import torch

shapes = json.load(open(sys.argv[1]))
iters, threads = int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(0)
out = {}
for name, kw in [("single", {"foreach": False}), ("foreach", {"foreach": True}), ("fused", {"fused": True})]:
    params = [torch.nn.Parameter(torch.randn(s) * 0.02) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, **kw)
    times = []
    for k in range(iters + 1):
        t = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if k > 0:  # the first step allocates the state
            times.append(time.perf_counter() - t)
    out[name] = statistics.median(times)
    del opt, params
print(json.dumps(out))
