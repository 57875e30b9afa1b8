// Package gsm8k is GSM8K answer extraction and scoring, exactly as
// skyrl-gym's `skyrl_gym.envs.gsm8k.utils` (`method="strict"`), the Rust
// SDK's `skyrl_sdk::gsm8k` and the Python SDK's `skyrl_sdk.gsm8k`.
package gsm8k

import (
	"regexp"
	"strings"
)

var answer = regexp.MustCompile(`#### (\-?[0-9\.\,]+)`)

// ExtractAnswer is the FIRST `#### <number>` answer (regex
// `#### (\-?[0-9\.\,]+)`) with `,` and `$` removed; false when the response
// has none.
func ExtractAnswer(response string) (string, bool) {
	m := answer.FindStringSubmatch(response)
	if m == nil {
		return "", false
	}
	return strings.NewReplacer(",", "", "$", "").Replace(m[1]), true
}

// ComputeScore is skyrl-gym's compute_score with format_score 0 and score
// 1: no answer -> 0.0; answer equal to groundTruth (as strings) -> 1.0;
// otherwise 0.0.
func ComputeScore(response, groundTruth string) float64 {
	return ComputeScoreWith(response, groundTruth, 0, 1)
}

// ComputeScoreWith is compute_score with explicit scores: no answer -> 0.0;
// answer == groundTruth -> score; otherwise formatScore.
func ComputeScoreWith(response, groundTruth string, formatScore, score float64) float64 {
	a, ok := ExtractAnswer(response)
	switch {
	case !ok:
		return 0
	case a == groundTruth:
		return score
	default:
		return formatScore
	}
}
