"""The `policy-loss` export: calls the registered `Algorithm.policy_loss`."""

from __future__ import annotations

from typing import Any

from wit_world import exports  # type: ignore[import-not-found]
from wit_world.exports import policy_loss as wit_loss  # type: ignore[import-not-found]

from ._algorithm_glue import config, finite, from_wit, instance, maybe_from_wit, to_wit
from ._glue import guarded
from .types import LossInput


class PolicyLoss(exports.PolicyLoss):
    def compute(self, input: Any) -> Any:
        def run() -> Any:
            out = instance().policy_loss(
                LossInput(
                    log_probs=from_wit(input.log_probs),
                    old_log_probs=from_wit(input.old_log_probs),
                    rollout_log_probs=maybe_from_wit(input.rollout_log_probs),
                    advantages=from_wit(input.advantages),
                    loss_mask=from_wit(input.loss_mask),
                    config=config(input.config_json),
                )
            )
            metrics = [(str(k), finite(v, f"metric {k}")) for k, v in dict(out.metrics).items()]
            return wit_loss.LossOutput(
                loss=finite(out.loss, "loss"), grad=to_wit(out.grad, "grad"), metrics=metrics
            )

        return guarded(run)
