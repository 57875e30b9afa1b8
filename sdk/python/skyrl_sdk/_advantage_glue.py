"""The `advantage` export: calls the registered `Algorithm.advantages`."""

from __future__ import annotations

from typing import Any

from wit_world import exports  # type: ignore[import-not-found]
from wit_world.exports import advantage as wit_adv  # type: ignore[import-not-found]

from ._algorithm_glue import config, from_wit, instance, maybe_from_wit, to_wit
from ._glue import guarded
from .types import AdvantageInput


class Advantage(exports.Advantage):
    def compute(self, input: Any) -> Any:
        def run() -> Any:
            out = instance().advantages(
                AdvantageInput(
                    token_rewards=from_wit(input.token_rewards),
                    response_mask=from_wit(input.response_mask),
                    group_ids=list(input.group_ids),
                    values=maybe_from_wit(input.values),
                    config=config(input.config_json),
                )
            )
            return wit_adv.AdvantageOutput(
                advantages=to_wit(out.advantages, "advantages"),
                returns=to_wit(out.returns, "returns"),
            )

        return guarded(run)
