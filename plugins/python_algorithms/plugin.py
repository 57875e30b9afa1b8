"""MaxRL advantages and the DPPO policy loss as a sandboxed algorithm plugin.

Re-implements the host's built-in `maxrl` and `dppo` (skyrl 0.3.0's
`compute_maxrl_advantage` and `compute_policy_loss_dppo`) in plain Python, to
show that an algorithm needs no autograd: the loss returns its gradient with
respect to each token's log-probability, and the host back-propagates it.
Select with `advantage_estimator=plugin:NAME policy_loss_type=plugin:NAME`
and `--algorithm NAME=plugins/python_algorithms`.
"""

from __future__ import annotations

import math

import skyrl_sdk as sk

EPSILON = 1e-6  # added to the group mean, as the built-in maxrl
LOG_RATIO_CLIP = 20.0  # log-ratios are clamped before exp, as the built-ins
KL_EPS = 1e-8


def _dppo_settings(config: dict) -> tuple[str, float, float]:
    d = config.get("dppo") or {}
    kind = d.get("dppo_type", "binary_tv")
    if kind not in ("binary_tv", "binary_kl"):
        raise sk.ConfigError(f"dppo.dppo_type must be binary_tv or binary_kl, got {kind!r}")
    return kind, float(d.get("delta_low", 0.2)), float(d.get("delta_high", 0.2))


def _log(x: float) -> float:
    """`log` with torch's IEEE results outside the domain (NaN below 0)."""
    if x > 0.0:
        return math.log(x)
    return -math.inf if x == 0.0 else math.nan


def _dropped(kind: str, low: float, high: float, lp: float, mu: float, a: float) -> bool:
    """DPPO's trust-region mask: the token moved too far in its advantage's direction."""
    p, q = math.exp(lp), math.exp(mu)
    diff = p - q
    if kind == "binary_tv":
        return (a > 0 and diff > high) or (a < 0 and -diff > low)
    kl = q * (mu - lp) + (1.0 - q) * _log((1.0 - q + KL_EPS) / (1.0 - p + KL_EPS))
    return (a > 0 and diff > 0 and kl > high) or (a < 0 and diff < 0 and kl > low)


class MaxRlDppo(sk.Algorithm):
    def advantages(self, inp: sk.AdvantageInput) -> sk.AdvantageOutput:
        rewards, mask = inp.token_rewards, inp.response_mask
        if len(inp.group_ids) != rewards.rows:
            raise sk.InputError(f"{len(inp.group_ids)} group ids for {rewards.rows} rows")
        scores = [sum(rewards.row(r)) for r in range(rewards.rows)]
        groups: dict[str, list[int]] = {}
        for r, gid in enumerate(inp.group_ids):
            groups.setdefault(gid, []).append(r)
        per_row = [0.0] * rewards.rows
        for members in groups.values():
            if len(members) == 1:
                per_row[members[0]] = scores[members[0]]
                continue
            mean = sum(scores[r] for r in members) / len(members)
            for r in members:
                per_row[r] = (scores[r] - mean) / (mean + EPSILON)
        adv = sk.Matrix.from_rows(
            [[per_row[r] * m for m in mask.row(r)] for r in range(rewards.rows)]
        )
        return sk.AdvantageOutput(advantages=adv, returns=adv)

    def policy_loss(self, inp: sk.LossInput) -> sk.LossOutput:
        kind, low, high = _dppo_settings(inp.config)
        behaviour = inp.rollout_log_probs or inp.old_log_probs
        grad = sk.Matrix.zeros(inp.log_probs.rows, inp.log_probs.cols)
        loss = dropped_tokens = tokens = 0.0
        for i, m in enumerate(inp.loss_mask.data):
            if m == 0.0:
                continue
            lp, mu, a = inp.log_probs.data[i], behaviour.data[i], inp.advantages.data[i]
            delta = lp - mu
            ratio = math.exp(max(-LOG_RATIO_CLIP, min(LOG_RATIO_CLIP, delta)))
            tokens += m
            if _dropped(kind, low, high, lp, mu, a):
                dropped_tokens += m
                continue
            loss -= m * ratio * a
            if abs(delta) <= LOG_RATIO_CLIP:
                grad.data[i] = -m * ratio * a
        return sk.LossOutput(
            loss=loss, grad=grad, metrics={"clip_ratio": dropped_tokens / max(tokens, 1.0)}
        )


sk.export_algorithm(
    MaxRlDppo,
    name="maxrl_dppo_py",
    version="0.1.0",
    description="MaxRL advantages and the DPPO loss (as the built-in maxrl and dppo), in Python.",
)
