package skyrl

import (
	"errors"
	"fmt"
)

// Environment is a skyrl-gym style environment: one value per episode. The
// host creates it through the factory given to ExportEnv, calls Init once,
// then Step until a step is Done, then Metrics and Close.
//
// Embed BaseEnv for the default Init (prompt unchanged, metadata {}),
// Metrics ({}) and Close (nothing); Step is the one method to write.
type Environment interface {
	// Init returns the (possibly rewritten) prompt and a metadata object.
	Init(prompt []Message) ([]Message, map[string]any, error)
	// Step applies the model's action.
	Step(action string) (StepOutput, error)
	// Metrics are episode metrics: numbers or bools, averaged by the host.
	Metrics() map[string]any
	// Close releases resources at the end of the episode.
	Close()
}

// BaseEnv gives an Environment the default Init, Metrics and Close.
type BaseEnv struct{}

// Init keeps the prompt, with metadata {}.
func (BaseEnv) Init(prompt []Message) ([]Message, map[string]any, error) {
	return prompt, map[string]any{}, nil
}

// Metrics is {}.
func (BaseEnv) Metrics() map[string]any { return map[string]any{} }

// Close does nothing.
func (BaseEnv) Close() {}

// EnvFactory builds one episode's Environment from the env config (a JSON
// object) and the dataset row's extras. Return a *ConfigError for unusable
// config or extras.
type EnvFactory func(config map[string]any, extras Extras) (Environment, error)

// Tool is a set of named tools.
type Tool interface {
	Specs() []ToolSpec
	// Call runs tool `name`; the result is sent as is when it is a string,
	// else as JSON. Return an *InputError for unusable arguments.
	Call(name string, args map[string]any) (any, error)
}

// Reward is a reward function. groundTruth is the parsed JSON ground truth
// (strings, json.Number, bools, maps, slices; nil when absent).
type Reward interface {
	Score(prompt []Message, response string, groundTruth any, extras Extras) (float64, error)
}

// RewardFunc adapts a function to Reward.
type RewardFunc func(prompt []Message, response string, groundTruth any, extras Extras) (float64, error)

// Score calls f.
func (f RewardFunc) Score(prompt []Message, response string, groundTruth any, extras Extras) (float64, error) {
	return f(prompt, response, groundTruth, extras)
}

// Kind is what a plugin implements.
type Kind string

const (
	KindEnvironment Kind = "environment"
	KindTool        Kind = "tool"
	KindReward      Kind = "reward"
)

// Registration is what ExportEnv / ExportTool / ExportReward recorded.
type Registration struct {
	Kind   Kind
	Info   Info
	NewEnv EnvFactory
	Tool   Tool
	Reward Reward
}

var registered *Registration

func register(r Registration) {
	if registered != nil {
		panic(fmt.Sprintf("skyrl: one plugin per component: %q is already exported", registered.Info.Name))
	}
	registered = &r
}

// ExportEnv exports the environment built by factory as this component's
// env. Call it once, from an init function.
func ExportEnv(factory EnvFactory, info Info) {
	if factory == nil {
		panic("skyrl: ExportEnv needs a factory")
	}
	register(Registration{Kind: KindEnvironment, Info: info, NewEnv: factory})
}

// ExportTool exports tool as this component's tool set. Call it once, from
// an init function.
func ExportTool(tool Tool, info Info) {
	if tool == nil {
		panic("skyrl: ExportTool needs a Tool")
	}
	register(Registration{Kind: KindTool, Info: info, Tool: tool})
}

// ExportReward exports reward as this component's reward function. Call it
// once, from an init function.
func ExportReward(reward Reward, info Info) {
	if reward == nil {
		panic("skyrl: ExportReward needs a Reward")
	}
	register(Registration{Kind: KindReward, Info: info, Reward: reward})
}

// Registered is the plugin the Export* call recorded (the build's glue reads
// it; plugin code does not need it).
func Registered() (*Registration, error) {
	if registered == nil {
		return nil, errors.New("the plugin exported nothing: call skyrl.ExportEnv / ExportTool / ExportReward from an init function")
	}
	return registered, nil
}

// RegisteredAs is Registered of the expected kind, else an error naming the mismatch.
func RegisteredAs(kind Kind) (*Registration, error) {
	r, err := Registered()
	if err != nil {
		return nil, err
	}
	if r.Kind != kind {
		return nil, fmt.Errorf("the plugin exports a %s, but skyrl-plugin.toml says %s", r.Kind, kind)
	}
	return r, nil
}
