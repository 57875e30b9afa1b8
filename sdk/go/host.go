package skyrl

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"time"
)

// LogLevel is a host log severity.
type LogLevel int

const (
	LevelTrace LogLevel = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

func (l LogLevel) String() string {
	switch l {
	case LevelTrace:
		return "trace"
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarn:
		return "warn"
	case LevelError:
		return "error"
	}
	return fmt.Sprintf("LogLevel(%d)", int(l))
}

// HostFuncs are the host imports, installed by the build's glue with
// SetHost; outside a wasm host they are unset.
type HostFuncs struct {
	Log             func(level LogLevel, message string)
	CallTool        func(name, argsJSON string) (string, error)
	CallToolTimeout func(name, argsJSON string, timeoutMs uint32) (string, error)
}

var host HostFuncs

// SetHost installs the host imports (called by the build's glue).
func SetHost(h HostFuncs) { host = h }

// Log writes a line into the host's `tracing` output; outside a wasm host it
// goes to stderr.
func Log(level LogLevel, message string) {
	if host.Log == nil {
		fmt.Fprintf(os.Stderr, "[%s] %s\n", level, message)
		return
	}
	host.Log(level, message)
}

// Logf is Log with a formatted message.
func Logf(level LogLevel, format string, args ...any) {
	Log(level, fmt.Sprintf(format, args...))
}

// ErrNoHost is returned by CallTool outside a wasm host.
var ErrNoHost = errors.New("not running inside a skyrl wasm host")

func argsText(args any) (string, error) {
	switch a := args.(type) {
	case nil:
		return "{}", nil
	case string:
		return a, nil
	case []byte:
		return string(a), nil
	case json.RawMessage:
		return string(a), nil
	}
	data, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("tool arguments are not JSON: %w", err)
	}
	return string(data), nil
}

// CallTool calls a tool another (tool) plugin provides, routed by the host.
// args is JSON text (string, []byte) or any value json.Marshal accepts.
// Declare the tool in Info.UsesTools.
func CallTool(name string, args any) (string, error) {
	text, err := argsText(args)
	if err != nil {
		return "", err
	}
	if host.CallTool == nil {
		return "", fmt.Errorf("cannot call tool `%s`: %w", name, ErrNoHost)
	}
	out, err := host.CallTool(name, text)
	if err != nil {
		return "", fmt.Errorf("tool `%s`: %w", name, err)
	}
	return out, nil
}

// CallToolTimeout is CallTool that must finish within timeout (capped by the
// tool's own sandbox deadline).
func CallToolTimeout(name string, args any, timeout time.Duration) (string, error) {
	text, err := argsText(args)
	if err != nil {
		return "", err
	}
	if host.CallToolTimeout == nil {
		return "", fmt.Errorf("cannot call tool `%s`: %w", name, ErrNoHost)
	}
	ms := timeout.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	if ms > math.MaxUint32 {
		ms = math.MaxUint32
	}
	out, err := host.CallToolTimeout(name, text, uint32(ms))
	if err != nil {
		return "", fmt.Errorf("tool `%s`: %w", name, err)
	}
	return out, nil
}
