"""PyTorch reference for skyrl-train's algorithms, used by the Rust parity tests.

Usage: skyrl_reference.py SPEC.json INPUTS.safetensors OUTPUTS.safetensors

SPEC is {"cases": [{"name", "fn", "params", "inputs": {arg: tensor_key}}]}.
Each case's outputs are written as "<name>/<output>" (tensors) and
"<name>/metric/<metric>" (0-d float64 tensors). The functions below restate
skyrl-train's `ppo_utils.py` / `off_policy_correction_utils.py` semantics
(SKYRL_REFERENCE.md where they differ), in fp32.
"""

import json
import math
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


def safe_exp(delta, clip=20.0):
    return torch.clamp(delta.float(), -clip, clip).exp()


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


# ---------------------------------------------------------------- off-policy
def off_policy(loss, old, rollout, mask, c):
    tis_type = c.get("tis_ratio_type")
    seq_metric = c.get("sequence_mask_metric")
    tok_lo, tok_hi = c.get("token_mask_is_threshold_low"), c.get("token_mask_is_threshold_high")
    if rollout is None or (tis_type is None and seq_metric is None and tok_lo is None and tok_hi is None):
        return loss, mask
    log_ratio = old - rollout
    ratio = safe_exp(log_ratio)
    # outlier sequences
    valid = mask > 0
    hi, lo = c.get("outlier_token_is_threshold_high"), c.get("outlier_token_is_threshold_low")
    over = (ratio > hi) & valid if hi is not None else torch.zeros_like(valid)
    under = (ratio < lo) & valid if lo is not None else torch.zeros_like(valid)
    ok = ((~over & ~under) | (mask == 0)).all(dim=-1, keepdim=True)
    mask = mask * ok.float()
    if tok_lo is not None or tok_hi is not None:
        keep = torch.ones_like(ratio, dtype=torch.bool)
        if tok_hi is not None:
            keep &= ratio <= tok_hi
        if tok_lo is not None:
            keep &= ratio >= tok_lo
        mask = mask * keep.float()
    if tis_type == "token":
        loss = loss * torch.clamp(ratio, max=c["token_tis_ratio_clip_high"])
    elif tis_type == "sequence":
        s = safe_exp((log_ratio * mask).sum(dim=-1, keepdim=True))
        loss = loss * torch.clamp(s, max=c["sequence_tis_ratio_clip_high"])
    if seq_metric == "geometric":
        n = mask.sum(dim=-1, keepdim=True).clamp(min=1.0)
        g = safe_exp((log_ratio * mask).sum(dim=-1, keepdim=True) / n)
        mask = mask * (~(g > c["geo_mask_high"]) & ~(g < c["geo_mask_low"])).float()
    elif seq_metric == "product":
        p = safe_exp((log_ratio * mask).sum(dim=-1, keepdim=True))
        mask = mask * (~(p > c["product_mask_high"]) & ~(p < c["product_mask_low"])).float()
    return loss, mask


# ---------------------------------------------------------------- policy losses
def pl_ppo(lp, old, adv, mask, c, dual):
    ratio = safe_exp(lp - old)
    s1 = ratio * adv
    s2 = ratio.clamp(1 - c["eps_clip_low"], 1 + c["eps_clip_high"]) * adv
    loss = -torch.min(s1, s2)
    clip = masked_mean((-s2 > -s1).float(), mask).item()
    if dual:
        loss = torch.where(adv < 0, torch.min(-adv * c["clip_ratio_c"], loss), loss)
    return loss, clip


def pl_gspo(lp, old, adv, mask, c):
    seq = masked_mean(lp - old, mask, dim=-1).unsqueeze(-1)
    ratio = torch.exp(torch.clamp(lp - lp.detach() + seq.detach(), max=10))
    s1 = ratio * adv
    s2 = ratio.clamp(1 - c["eps_clip_low"], 1 + c["eps_clip_high"]) * adv
    return -torch.min(s1, s2), masked_mean((-s2 > -s1).float(), mask).item()


def pl_cispo(lp, old, adv, mask, c):
    lo, hi = 1 - c["cispo_eps_clip_low"], 1 + c["cispo_eps_clip_high"]
    ratio = safe_exp(lp - old)
    loss = -adv * torch.clamp(ratio, lo, hi).detach() * lp
    return loss, masked_mean(((ratio < lo) | (ratio > hi)).float(), mask).item()


def pl_sapo(lp, old, adv, mask, c):
    ratio = torch.exp(torch.clamp(lp - old, -20.0, 20.0))
    taus = torch.where(adv > 0, torch.tensor(c["tau_pos"]), torch.tensor(c["tau_neg"]))
    gates = torch.sigmoid(taus * (ratio - 1.0)) * (4.0 / taus)
    return -gates * adv, 0.0


def pl_clip_cov(lp, old, adv, mask, c):
    ratio = safe_exp(lp - old)
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1 - c["eps_clip_low"], 1 + c["eps_clip_high"])
    by_origin = (pg2 > pg1) & (mask > 0)
    cov = (adv - masked_mean(adv, mask)) * (lp - masked_mean(lp.detach(), mask))
    cov = cov.detach().clone()
    cov[mask == 0] = -torch.inf
    cov[by_origin] = -torch.inf
    clip_num = max(int(c["clip_ratio"] * mask.sum().item()), 1)
    idx = torch.nonzero((cov < c["clip_cov_ub"]) & (cov > c["clip_cov_lb"]) & (mask > 0))
    corr = torch.ones_like(adv)
    if len(idx) > 0:
        torch.manual_seed(c["rng_seed"])
        perm = torch.randperm(len(idx))
        idx = idx[perm[: min(clip_num, len(idx))]]
        corr[idx[:, 0], idx[:, 1]] = 0
    frac = masked_mean((corr == 0).float(), mask).item()
    return torch.maximum(pg1, pg2) * corr, frac


def pl_kl_cov(lp, old, adv, mask, c):
    d = lp - old
    ratio = safe_exp(d)
    pg1 = -adv * ratio
    pg_kl = -adv * ratio + c["ppo_kl_coef"] * d.abs()
    loss = pg1.clone()
    valid = mask > 0
    vidx = torch.nonzero(valid.reshape(-1), as_tuple=True)[0]
    a = adv[valid].detach().reshape(-1)
    l = lp[valid].detach().reshape(-1)
    if len(a) > 0:
        cov = (a - a.mean()) * (l - l.mean())
        k = max(1, int(len(cov) * c["kl_cov_frac"]))
        top = torch.topk(cov, min(k, len(cov)), largest=True).indices
        sel = vidx[top]
        W = adv.shape[1]
        loss[sel // W, sel % W] = pg_kl[sel // W, sel % W]
    return loss, 0.0


def pl_cross_entropy(lp, old, adv, mask, c):
    return -lp, 0.0


def pl_rollout_is(lp, old, adv, mask, c, rollout):
    ratio = safe_exp(lp - rollout)
    inr = (ratio > 1 - c["eps_clip_low"]) & (ratio < 1 + c["eps_clip_high"])
    w = torch.where(inr, ratio, torch.zeros_like(ratio))
    return -(w.detach() * adv * lp), masked_mean((~inr).float(), mask).item()


def reduce(loss, mask, red, max_seq_len):
    if red == "token_mean":
        return masked_mean(loss, mask)
    if red == "sequence_mean":
        return masked_mean(loss, mask, dim=-1).mean()
    return (torch.sum(loss * mask, dim=-1) / max_seq_len).mean()


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


POLICY = {
    "regular": lambda *a: pl_ppo(*a, dual=False),
    "dual_clip": lambda *a: pl_ppo(*a, dual=True),
    "gspo": pl_gspo,
    "cispo": pl_cispo,
    "sapo": pl_sapo,
    "clip_cov": pl_clip_cov,
    "kl_cov": pl_kl_cov,
    "cross_entropy": pl_cross_entropy,
}
NO_OFF_POLICY = {"clip_cov", "kl_cov", "cross_entropy"}


def policy_case(t, p):
    """Per-token loss, reduced loss, and d(total)/d(log_probs)."""
    lp = t["log_probs"].clone().requires_grad_(True)
    old, adv, mask = t["old_log_probs"], t["advantages"], t["loss_mask"]
    rollout = t.get("rollout_logprobs")
    name = p["policy_loss_type"]
    if name == "rollout_is":
        loss, clip = pl_rollout_is(lp, old, adv, mask, p, rollout)
    else:
        loss, clip = POLICY[name](lp, old, adv, mask, p)
    if name not in NO_OFF_POLICY:
        loss, mask = off_policy(loss, old, rollout, mask, p.get("off_policy_correction", {}))
    total = reduce(loss, mask, p["loss_reduction"], p.get("max_seq_len"))
    out = {"loss": loss.detach(), "loss_mask": mask, "reduced": total.detach()}
    if p.get("use_kl_loss"):
        kl_mask = t["loss_mask"]
        k = kl(lp, t["ref_log_probs"], kl_mask, p["kl_estimator_type"])
        kl_term = masked_mean(k, kl_mask, dim=-1).mean()
        total = total + p["kl_loss_coef"] * kl_term
    if p.get("use_entropy_loss"):
        logits = t["logits"].clone().requires_grad_(True)
        ent = masked_mean(entropy(logits), t["loss_mask"])
        total = total - p["entropy_loss_coef"] * ent
    total.backward()
    out["total"] = total.detach()
    out["grad"] = lp.grad
    return out, {"clip_ratio": clip}


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
    if fn == "reduce":
        return {"loss": reduce(t["loss"], t["mask"], p["reduction"], p.get("max_seq_len"))}, {}
    if fn == "policy":
        return policy_case(t, p)
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
