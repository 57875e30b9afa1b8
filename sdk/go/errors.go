package skyrl

import (
	"errors"
	"fmt"
)

// ConfigError reports an unusable env config or extras; the host receives
// the WIT `plugin-error::invalid-config`.
type ConfigError struct{ Message string }

func (e *ConfigError) Error() string { return "invalid config: " + e.Message }

// InputError reports an unusable call input (an action, tool arguments); the
// host receives `plugin-error::invalid-input`.
type InputError struct{ Message string }

func (e *InputError) Error() string { return "invalid input: " + e.Message }

// ConfigErrorf is a *ConfigError with a formatted message.
func ConfigErrorf(format string, args ...any) error {
	return &ConfigError{Message: fmt.Sprintf(format, args...)}
}

// InputErrorf is an *InputError with a formatted message.
func InputErrorf(format string, args ...any) error {
	return &InputError{Message: fmt.Sprintf(format, args...)}
}

// ErrorKind is the WIT `plugin-error` case an error maps to.
type ErrorKind int

const (
	// ErrFailed is `failed`: any error that is not a config or input error.
	ErrFailed ErrorKind = iota
	// ErrInvalidConfig is `invalid-config` (a *ConfigError in the chain).
	ErrInvalidConfig
	// ErrInvalidInput is `invalid-input` (an *InputError in the chain).
	ErrInvalidInput
)

// Classify maps err to its `plugin-error` case and message. A *ConfigError
// or *InputError anywhere in the chain (errors.As) picks the case; the
// message is its Message when err is that error itself, else err.Error()
// (keeping what the wrappers added).
func Classify(err error) (ErrorKind, string) {
	var config *ConfigError
	var input *InputError
	switch {
	case errors.As(err, &config):
		if err == error(config) {
			return ErrInvalidConfig, config.Message
		}
		return ErrInvalidConfig, err.Error()
	case errors.As(err, &input):
		if err == error(input) {
			return ErrInvalidInput, input.Message
		}
		return ErrInvalidInput, err.Error()
	default:
		return ErrFailed, err.Error()
	}
}
