// GSM8K (skyrl-gym `gsm8k`) in JavaScript: one step, done, no observations.
// The reward is 1.0 when the first `#### <number>` of the response (commas and
// `$` removed) equals `extras.reward_spec.ground_truth`, else 0.0 — the same
// env as envs/gsm8k (Rust) and envs/gsm8k_py (Python).

import { Environment, StepOutput, exportEnv, gsm8k } from "skyrl-sdk";

class Gsm8k extends Environment {
  constructor(config, extras) {
    super(config, extras);
    this.groundTruth = extras.groundTruthStr();
  }

  step(action) {
    return StepOutput.final(gsm8k.computeScore(action, this.groundTruth));
  }
}

export const { plugin, environment } = exportEnv(Gsm8k, {
  name: "gsm8k_js",
  version: "0.1.0",
  description: "GSM8K math word problems, answer after '#### ' (JavaScript SDK)",
});
