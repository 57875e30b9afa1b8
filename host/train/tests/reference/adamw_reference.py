"""torch.optim.AdamW + clip_grad_norm_ + HF constant-with-warmup schedule.

Usage: adamw_reference.py SPEC.json INPUTS.safetensors OUTPUTS.safetensors
INPUTS: "param.<name>" initial values, "grad.<k>.<name>" gradient of step k.
SPEC: {"lr", "betas", "eps", "weight_decay", "max_grad_norm", "warmup", "steps", "names"}.
OUTPUTS: "step<k>.<name>" parameters after step k, "exp_avg.<name>",
"exp_avg_sq.<name>" final moments, "norm<k>" pre-clip grad norm.
"""

import json
import sys

import torch
from safetensors.torch import load_file, save_file

spec = json.load(open(sys.argv[1]))
t = load_file(sys.argv[2])
names = spec["names"]
params = [torch.nn.Parameter(t[f"param.{n}"].clone()) for n in names]
opt = torch.optim.AdamW(
    params, lr=spec["lr"], betas=tuple(spec["betas"]), eps=spec["eps"], weight_decay=spec["weight_decay"]
)
warm = spec["warmup"]
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / max(1, warm) if s < warm else 1.0)
out = {}
for k in range(spec["steps"]):
    opt.zero_grad()
    for n, p in zip(names, params):
        p.grad = t[f"grad.{k}.{n}"].clone()
    norm = torch.nn.utils.clip_grad_norm_(params, spec["max_grad_norm"])
    out[f"norm{k}"] = norm.detach().clone().reshape(1)
    opt.step()
    sched.step()
    for n, p in zip(names, params):
        out[f"step{k}.{n}"] = p.detach().clone()
for n, p in zip(names, params):
    st = opt.state[p]
    out[f"exp_avg.{n}"] = st["exp_avg"].clone()
    out[f"exp_avg_sq.{n}"] = st["exp_avg_sq"].clone()
save_file(out, sys.argv[3])
