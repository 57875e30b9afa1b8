"""GSM8K (skyrl-gym `gsm8k`) in Python: one step, done, no observations.
The reward is 1.0 when the first `#### <number>` of the response (commas and
`$` removed) equals `extras.reward_spec.ground_truth`, else 0.0 — the same
env as envs/gsm8k (Rust); the conformance suite checks they agree."""

import skyrl_sdk as sk
from skyrl_sdk import gsm8k


class Gsm8k(sk.Environment):
    def __init__(self, config, extras):
        super().__init__(config, extras)
        self.ground_truth = extras.ground_truth_str()

    def step(self, action):
        return sk.StepOutput.final(gsm8k.compute_score(action, self.ground_truth))


sk.export_env(
    Gsm8k,
    name="gsm8k_py",
    version="0.1.0",
    description="GSM8K math word problems, answer after '#### ' (Python SDK)",
)
