"""Runs skyrl 0.3.0's own algorithm functions for the Rust parity tests.

Usage: skyrl030_reference.py SPEC.json INPUTS.safetensors OUTPUTS.safetensors

The functions come from the installed `skyrl==0.3.0` wheel (installed with
--no-deps by scripts/setup): `skyrl/backends/skyrl_train/utils/ppo_utils.py`,
`off_policy_correction_utils.py` and `torch_utils.py`, loaded without the
package `__init__` files. What those modules import and the tested functions
never use (ray, jaxtyping, loguru, omegaconf, skyrl.train.config) is stubbed
here; nothing of skyrl is copied.

SPEC is {"cases": [{"name", "fn", "params", "inputs": {arg: tensor_key}}]}.
Outputs are "<name>/<output>" tensors and "<name>/metric/<metric>" (0-d float64).
"""

import importlib.util
import json
import sys
import types
from types import SimpleNamespace

import numpy as np
import torch
from safetensors.torch import load_file, save_file

torch.use_deterministic_algorithms(True)
SKYRL_VERSION = "0.3.0"


# ---------------------------------------------------------------- loading skyrl
def _stub(name, **attrs):
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    return mod


class _Subscriptable:
    def __class_getitem__(cls, item):
        return cls


def _install_stubs():
    _stub(
        "ray",
        remote=lambda cls=None, **kw: cls if cls is not None else (lambda c: c),
        is_initialized=lambda: False,
    )
    for name, attrs in {
        "jaxtyping": {"Float": _Subscriptable, "Integer": _Subscriptable},
        "loguru": {"logger": SimpleNamespace(**{k: print for k in ("info", "warning", "debug", "error")})},
        "omegaconf": {"DictConfig": dict},
    }.items():
        try:
            __import__(name)
        except ImportError:
            _stub(name, **attrs)


def load_skyrl():
    """Imports ppo_utils / off_policy_correction_utils / torch_utils of the
    installed skyrl, whose version must be SKYRL_VERSION."""
    spec = importlib.util.find_spec("skyrl")
    if spec is None:
        sys.exit(f"skyrl=={SKYRL_VERSION} is not installed: pip install --no-deps skyrl=={SKYRL_VERSION}")
    root = spec.submodule_search_locations[0]
    from importlib.metadata import version

    if version("skyrl") != SKYRL_VERSION:
        sys.exit(f"skyrl {version('skyrl')} is installed, the parity cases need {SKYRL_VERSION}")
    _install_stubs()
    # Parent packages as bare namespaces: their __init__ files pull in the
    # whole training stack.
    for pkg in ["skyrl.backends", "skyrl.backends.skyrl_train", "skyrl.backends.skyrl_train.utils", "skyrl.train"]:
        mod = _stub(pkg)
        mod.__path__ = [root + "/" + "/".join(pkg.split(".")[1:])]
    _stub("skyrl.train.config", AlgorithmConfig=SimpleNamespace)
    import skyrl.backends.skyrl_train.utils.ppo_utils as pu
    import skyrl.backends.skyrl_train.utils.torch_utils as tu

    return pu, tu


pu, tu = load_skyrl()

POLICY = {
    "regular": pu.ppo_policy_loss,
    "dual_clip": pu.ppo_policy_loss,
    "gspo": pu.gspo_policy_loss,
    "cispo": pu.compute_policy_loss_cispo,
    "sapo": pu.sapo_policy_loss,
    "clip_cov": pu.compute_policy_loss_clip_cov,
    "kl_cov": pu.compute_policy_loss_kl_cov,
    "cross_entropy": pu.cross_entropy_loss,
    "rollout_is": pu.rollout_is_policy_loss,
    "dppo": pu.dppo_policy_loss,
    "importance_sampling": pu.importance_sampling_loss,
}
ADVANTAGE = {
    "grpo": pu.compute_grpo_outcome_advantage,
    "rloo": pu.compute_rloo_outcome_advantage,
    "reinforce++": pu.compute_reinforce_plus_plus_outcome_advantage,
    "gae": pu.compute_gae_advantage_return,
    "maxrl": pu.compute_maxrl_advantage,
}


def namespace(value):
    """The project's AlgorithmConfig (JSON) as the attribute object skyrl reads."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: namespace(v) for k, v in value.items()})
    return value


def prompt_boundaries(uids):
    """(start, end) of each run of equal uids: the mini-batch's prompts."""
    bounds, start = [], 0
    for i in range(1, len(uids) + 1):
        if i == len(uids) or uids[i] != uids[i - 1]:
            bounds.append((start, i))
            start = i
    return bounds


def scaled_advantages(t, p, cfg):
    return pu.apply_loss_reduction_to_advantages_minibatch(
        advantages=t["advantages"],
        loss_mask=t["loss_mask"],
        loss_reduction=cfg.loss_reduction,
        micro_batch_size=p["micro_batch_size"],
        max_seq_len=cfg.max_seq_len,
        prompt_boundaries=prompt_boundaries(p["uids"]),
    )


# ---------------------------------------------------------------- cases
def advantage_case(t, p):
    fn = ADVANTAGE[p["estimator"]]
    adv, ret = fn(
        token_level_rewards=t["rewards"].clone(),
        response_mask=t["mask"],
        index=np.array(p["uids"], dtype=object),
        values=t.get("values"),
        grpo_norm_by_std=p.get("norm_by_std", True),
        gamma=p.get("gamma", 1.0),
        lambd=p.get("lambd", 1.0),
        config=None,
    )
    return {"advantages": adv, "returns": ret}, {}


def scale_case(t, p):
    cfg = namespace(p["config"])
    return {"advantages": scaled_advantages(t, p, cfg)}, {}


def policy_case(t, p):
    """The worker's objective for one micro-batch holding the whole mini-batch
    (skyrl's `_forward_backward_micro`, microbatch_weight 1, one DP rank)."""
    cfg = namespace(p["config"])
    lp = t["log_probs"].clone().requires_grad_(True)
    mask = t["loss_mask"]
    adv = scaled_advantages(t, p, cfg)
    rollout = t["rollout_logprobs"] if p["rollout"] else None
    if p["seed"] is not None:
        torch.manual_seed(p["seed"])
    policy_loss, metrics = POLICY[cfg.policy_loss_type](lp, t["old_log_probs"], adv, cfg, mask, rollout)
    total = policy_loss
    aux = torch.tensor(0.0)
    if cfg.use_kl_loss:
        kl = pu.compute_approx_kl(lp, t["ref_log_probs"], loss_mask=mask, kl_estimator_type=cfg.kl_estimator_type)
        aux = aux + tu.masked_mean(kl, mask, dim=-1).mean() * cfg.kl_loss_coef
    if cfg.use_entropy_loss:
        ent = tu.chunked_entropy_from_logits(t["logits"], requires_grad=True)
        aux = aux - tu.masked_mean(ent, mask) * cfg.entropy_loss_coef
    total = policy_loss + aux * 1.0
    total.backward()
    out = {"policy_loss": policy_loss.detach(), "total": total.detach(), "grad": lp.grad}
    return out, metrics


def run_case(case, tensors):
    t = {arg: tensors[key] for arg, key in case["inputs"].items()}
    fn = {"advantage": advantage_case, "scale": scale_case, "policy": policy_case}[case["fn"]]
    return fn(t, case["params"])


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
