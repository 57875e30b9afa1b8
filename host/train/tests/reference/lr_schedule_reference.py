"""transformers' get_scheduler, as skyrl-train builds it: the lr multiplier
after each scheduler step.

Usage: lr_schedule_reference.py SPEC.json OUT.json
SPEC: [{"name", "lr", "warmup", "total", "steps"}, ...]
OUT: one list of `steps + 1` multipliers per case (index k: after k steps).
"""

import json
import sys

import torch
from transformers import get_scheduler

out = []
for case in json.load(open(sys.argv[1])):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=case["lr"])
    sched = get_scheduler(
        case["name"], opt, num_warmup_steps=case["warmup"], num_training_steps=case["total"]
    )
    factors = [opt.param_groups[0]["lr"] / case["lr"]]
    for _ in range(case["steps"]):
        opt.step()
        sched.step()
        factors.append(opt.param_groups[0]["lr"] / case["lr"])
    out.append(factors)
json.dump(out, open(sys.argv[2], "w"))
