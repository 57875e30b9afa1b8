// GSM8K (skyrl-gym `gsm8k`) in Go: one step, done, no observations. The
// reward is 1.0 when the first `#### <number>` of the response (commas and
// `$` removed) equals `extras.reward_spec.ground_truth`, else 0.0 — the same
// env as envs/gsm8k (Rust) and envs/gsm8k_py (Python).
package main

import (
	skyrl "skyrl.dev/sdk"
	"skyrl.dev/sdk/gsm8k"
)

type Gsm8k struct {
	skyrl.BaseEnv
	groundTruth string
}

func (e *Gsm8k) Step(action string) (skyrl.StepOutput, error) {
	return skyrl.Final(gsm8k.ComputeScore(action, e.groundTruth)), nil
}

func init() {
	skyrl.ExportEnv(func(config map[string]any, extras skyrl.Extras) (skyrl.Environment, error) {
		groundTruth, err := extras.GroundTruthStr()
		if err != nil {
			return nil, err
		}
		return &Gsm8k{groundTruth: groundTruth}, nil
	}, skyrl.Info{
		Name:        "gsm8k_go",
		Version:     "0.1.0",
		Description: "GSM8K math word problems, answer after '#### ' (Go SDK)",
	})
}

func main() {}
