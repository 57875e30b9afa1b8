// Package skyrlglue is what the per-interface glue shares: error and
// message conversion, panics as `failed`, the plugin's self-description and
// the host imports handed to the skyrl package.
package skyrlglue

import (
	"fmt"
	"runtime/debug"

	"skyrl.dev/bindings/imports/skyrl_plugin_host"
	"skyrl.dev/bindings/imports/skyrl_plugin_types"
	skyrl "skyrl.dev/sdk"
)

func init() {
	skyrl.SetHost(skyrl.HostFuncs{
		Log: func(level skyrl.LogLevel, message string) {
			if level < skyrl.LevelTrace || level > skyrl.LevelError {
				level = skyrl.LevelInfo
			}
			skyrl_plugin_host.Log(skyrl_plugin_host.LogLevel(level), message)
		},
		CallTool: func(name, argsJSON string) (string, error) {
			r := skyrl_plugin_host.CallTool(name, argsJSON)
			if r.IsErr() {
				return "", fmt.Errorf("%s", r.Err())
			}
			return r.Ok(), nil
		},
		CallToolTimeout: func(name, argsJSON string, timeoutMs uint32) (string, error) {
			r := skyrl_plugin_host.CallToolTimeout(name, argsJSON, timeoutMs)
			if r.IsErr() {
				return "", fmt.Errorf("%s", r.Err())
			}
			return r.Ok(), nil
		},
	})
}

// Error is err as a WIT plugin-error.
func Error(err error) skyrl_plugin_types.PluginError {
	kind, message := skyrl.Classify(err)
	switch kind {
	case skyrl.ErrInvalidConfig:
		return skyrl_plugin_types.MakePluginErrorInvalidConfig(message)
	case skyrl.ErrInvalidInput:
		return skyrl_plugin_types.MakePluginErrorInvalidInput(message)
	default:
		return skyrl_plugin_types.MakePluginErrorFailed(message)
	}
}

// Panic is a recovered panic as a `failed` plugin-error with its stack.
func Panic(value any) skyrl_plugin_types.PluginError {
	return skyrl_plugin_types.MakePluginErrorFailed(fmt.Sprintf("panic: %v\n\n%s", value, debug.Stack()))
}

// LogPanic reports a recovered panic of a call that cannot return an error.
func LogPanic(what string, value any) {
	skyrl.Logf(skyrl.LevelError, "%s panicked: %v\n\n%s", what, value, debug.Stack())
}

// ToWit converts messages to their WIT records.
func ToWit(messages []skyrl.Message) []skyrl_plugin_types.Message {
	out := make([]skyrl_plugin_types.Message, len(messages))
	for i, m := range messages {
		out[i] = skyrl_plugin_types.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

// FromWit converts WIT message records to skyrl messages.
func FromWit(messages []skyrl_plugin_types.Message) []skyrl.Message {
	out := make([]skyrl.Message, len(messages))
	for i, m := range messages {
		out[i] = skyrl.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

// Info is the registered plugin's self-description.
func Info() skyrl_plugin_types.PluginInfo {
	reg, err := skyrl.Registered()
	if err != nil {
		panic(err.Error())
	}
	var kind skyrl_plugin_types.PluginKind
	switch reg.Kind {
	case skyrl.KindEnvironment:
		kind = skyrl_plugin_types.PluginKind_Environment
	case skyrl.KindTool:
		kind = skyrl_plugin_types.PluginKind_Tool
	case skyrl.KindReward:
		kind = skyrl_plugin_types.PluginKind_Reward
	default:
		panic(fmt.Sprintf("unknown plugin kind %q", reg.Kind))
	}
	usesTools := reg.Info.UsesTools
	if usesTools == nil {
		usesTools = []string{}
	}
	return skyrl_plugin_types.PluginInfo{
		Name:        reg.Info.Name,
		Version:     reg.Info.Version,
		Kind:        kind,
		Description: reg.Info.Description,
		UsesTools:   usesTools,
	}
}
