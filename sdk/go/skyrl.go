// Package skyrl writes skyrl environments, tools and rewards in Go, compiled
// to WebAssembly components by `skyrl plugin build` (Go, GOOS=wasip1
// GOARCH=wasm, wit-bindgen go).
//
// A plugin is a `package main` that registers itself from an init function:
//
//	type Echo struct {
//		skyrl.BaseEnv
//		target string
//	}
//
//	func (e *Echo) Step(action string) (skyrl.StepOutput, error) {
//		if action == e.target {
//			return skyrl.Final(1), nil
//		}
//		return skyrl.Final(0), nil
//	}
//
//	func init() {
//		skyrl.ExportEnv(func(config map[string]any, extras skyrl.Extras) (skyrl.Environment, error) {
//			target, err := extras.GroundTruthStr()
//			return &Echo{target: target}, err
//		}, skyrl.Info{Name: "echo", Version: "0.1.0", Description: "Repeat the answer."})
//	}
//
//	func main() {}
//
// Everything in this package is plain Go (no wasm imports), so plugin logic
// can be unit-tested with `go test` on the host.
package skyrl

// Message is one OpenAI-style chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// User is a message with role `user`.
func User(content string) Message { return Message{Role: "user", Content: content} }

// Assistant is a message with role `assistant`.
func Assistant(content string) Message { return Message{Role: "assistant", Content: content} }

// System is a message with role `system`.
func System(content string) Message { return Message{Role: "system", Content: content} }

// StepOutput is the result of one Environment.Step.
type StepOutput struct {
	// Observations are shown to the model before its next turn.
	Observations []Message
	Reward       float64
	// Done ends the episode.
	Done bool
	// Metadata is a free-form JSON object (nil means {}).
	Metadata map[string]any
}

// Final is a final step: done, no observations.
func Final(reward float64) StepOutput { return StepOutput{Reward: reward, Done: true} }

// Next is a non-final step that shows observations to the model.
func Next(observations []Message, reward float64) StepOutput {
	return StepOutput{Observations: observations, Reward: reward}
}

// WithMetadata returns the step with its metadata set.
func (s StepOutput) WithMetadata(metadata map[string]any) StepOutput {
	s.Metadata = metadata
	return s
}

// ToolSpec describes one tool: name, description and the JSON schema of its
// arguments object (nil means {"type": "object"}).
type ToolSpec struct {
	Name        string
	Description string
	Parameters  map[string]any
}

// Info is a plugin's self-description.
type Info struct {
	// Name is a short identifier, e.g. `gsm8k_go`.
	Name string
	// Version is the plugin's semantic version, e.g. `0.1.0`.
	Version     string
	Description string
	// UsesTools names the tools the plugin calls through CallTool.
	UsesTools []string
}
