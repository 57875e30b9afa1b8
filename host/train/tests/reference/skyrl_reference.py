"""PyTorch reference for skyrl-train's algorithms, used by the Rust parity tests.

Usage: skyrl_reference.py SPEC.json INPUTS.safetensors OUTPUTS.safetensors

Policy losses and reductions are checked against skyrl 0.3.0's own functions
instead (skyrl030_reference.py).

SPEC is {"cases": [{"name", "fn", "params", "inputs": {arg: tensor_key}}]}.
Each case's outputs are written as "<name>/<output>" (tensors) and
"<name>/metric/<metric>" (0-d float64 tensors). The functions below restate
skyrl-train's `ppo_utils.py` / `off_policy_correction_utils.py` semantics
(SKYRL_REFERENCE.md where they differ), in fp32.
"""

import json
import sys
from collections import defaultdict

import torch
from safetensors.torch import load_file, save_file

torch.use_deterministic_algorithms(True)


# ---------------------------------------------------------------- helpers
def masked_mean(t, mask, dim=None):
    if dim is None:
        return (t * mask).sum() / mask.sum().clamp(min=1.0)
    return (t * mask).sum(dim=dim) / mask.sum(dim=dim).clamp(min=1.0)


def masked_var(v, mask):
    mean = masked_mean(v, mask)
    var = masked_mean((v - mean) ** 2, mask)
    n = mask.sum()
    return var * (n / (n - 1))


def masked_whiten(v, mask):
    return (v - masked_mean(v, mask)) * torch.rsqrt(masked_var(v, mask) + 1e-8)


def groups(uids):
    g = defaultdict(list)
    for i, u in enumerate(uids):
        g[u].append(i)
    return g


# ---------------------------------------------------------------- advantages
def outcome(rewards, mask, uids, f):
    scores = rewards.sum(dim=-1)
    out = scores.clone()
    for _, idx in groups(uids).items():
        vals = torch.stack([scores[i] for i in idx])
        res = f(vals, len(idx))
        for j, i in enumerate(idx):
            out[i] = res[j]
    adv = out.unsqueeze(-1) * mask
    return {"advantages": adv, "returns": adv}


def adv_grpo(rewards, mask, uids, norm_by_std=True, eps=1e-6):
    def f(v, n):
        if n == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = torch.mean(v), torch.std(v)
        return (v - mean) / (std + eps) if norm_by_std else v - mean

    return outcome(rewards, mask, uids, f)


def adv_rloo(rewards, mask, uids):
    def f(v, n):
        if n == 1:
            return torch.zeros_like(v)
        return (v - v.mean()) * (n / (n - 1))

    return outcome(rewards, mask, uids, f)


def adv_maxrl(rewards, mask, uids, eps=1e-6):
    def f(v, n):
        if n == 1:
            return v - 0.0
        m = v.mean()
        return (v - m) / (m + eps)

    return outcome(rewards, mask, uids, f)


def adv_rpp(rewards, mask, gamma):
    returns = torch.zeros_like(rewards)
    running = 0
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + gamma * running
        returns[:, t] = running
        running = running * mask[:, t]
    return {"advantages": masked_whiten(returns, mask) * mask, "returns": returns}


def adv_gae(rewards, values, mask, gamma, lambd):
    last = 0
    rev = []
    T = rewards.shape[-1]
    for t in reversed(range(T)):
        nxt = values[:, t + 1] if t < T - 1 else 0.0
        delta = rewards[:, t] + gamma * nxt - values[:, t]
        last = delta + gamma * lambd * last
        rev.append(last)
    adv = torch.stack(rev[::-1], dim=1)
    return {"advantages": masked_whiten(adv, mask), "returns": adv + values}


def critic_loss(values, old_values, returns, mask, value_clip):
    clipped = old_values + (values - old_values).clamp(-value_clip, value_clip)
    s1 = (clipped - returns) ** 2
    s2 = (values - returns) ** 2
    loss = 0.5 * masked_mean(torch.max(s1, s2), mask, dim=-1).mean()
    return {"loss": loss}, {"clipfrac": masked_mean((s1 > s2).float(), mask).item()}


def kl(lp, base, mask, kind):
    if kind == "k1":
        k = lp - base
    elif kind == "abs":
        k = (lp - base).abs()
    elif kind == "k2":
        k = 0.5 * (lp - base).square()
    else:
        x = torch.clamp(base - lp, -20, 20)
        k = torch.clamp(torch.exp(x) - x - 1, -10, 10)
    return k * mask


def entropy(logits):
    pd = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)


def run_case(case, tensors):
    p = case["params"]
    t = {arg: tensors[key] for arg, key in case["inputs"].items()}
    fn = case["fn"]
    uids = p.get("uids")
    if fn == "grpo":
        return adv_grpo(t["rewards"], t["mask"], uids, p.get("norm_by_std", True)), {}
    if fn == "rloo":
        return adv_rloo(t["rewards"], t["mask"], uids), {}
    if fn == "maxrl":
        return adv_maxrl(t["rewards"], t["mask"], uids), {}
    if fn == "reinforce++":
        return adv_rpp(t["rewards"], t["mask"], p["gamma"]), {}
    if fn == "gae":
        return adv_gae(t["rewards"], t["values"], t["mask"], p["gamma"], p["lambd"]), {}
    if fn == "batch_normalize":
        a, m = t["advantages"], t["mask"]
        mean = a.mean()
        var = ((a - mean).pow(2) * m).sum() / m.sum()
        return {"advantages": (a - mean) * var.clamp(min=1e-8).rsqrt()}, {}
    if fn == "critic":
        return critic_loss(t["values"], t["old_values"], t["returns"], t["mask"], p["value_clip"])
    if fn == "kl":
        return {"kl": kl(t["log_probs"], t["base"], t["mask"], p["kind"])}, {}
    if fn == "entropy":
        return {"entropy": entropy(t["logits"])}, {}
    raise ValueError(f"unknown fn {fn}")


def main():
    spec_path, in_path, out_path = sys.argv[1:4]
    spec = json.load(open(spec_path))
    tensors = load_file(in_path)
    out = {}
    for case in spec["cases"]:
        outputs, metrics = run_case(case, tensors)
        for k, v in outputs.items():
            out[f"{case['name']}/{k}"] = v.detach().clone().contiguous()
        for k, v in metrics.items():
            out[f"{case['name']}/metric/{k}"] = torch.tensor(float(v), dtype=torch.float64)
    save_file(out, out_path)


if __name__ == "__main__":
    main()
