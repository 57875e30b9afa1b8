package skyrl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Extras is the dataset row's extras: every column except `prompt` and
// `env_class` (`reward_spec`, `extra_info`, ...), plus `max_turns` set by the
// generator. Numbers are json.Number, so they keep their exact value.
type Extras map[string]any

// ParseObject parses a JSON object the host hands over (env config, extras):
// empty text or `null` is {}; anything else that is not an object is a
// *ConfigError. Numbers are json.Number.
func ParseObject(text, what string) (map[string]any, error) {
	if strings.TrimSpace(text) == "" {
		return map[string]any{}, nil
	}
	decoder := json.NewDecoder(strings.NewReader(text))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		return nil, ConfigErrorf("%s is not valid JSON: %v", what, err)
	}
	if decoder.More() {
		return nil, ConfigErrorf("%s is not valid JSON: trailing data", what)
	}
	switch v := value.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return v, nil
	default:
		return nil, ConfigErrorf("%s must be a JSON object, got %s", what, short(text))
	}
}

// ParseExtras parses the extras JSON (see ParseObject).
func ParseExtras(text string) (Extras, error) {
	m, err := ParseObject(text, "extras")
	return Extras(m), err
}

// DecodeConfig decodes an env config (or any JSON-like value) into out, a
// pointer to a struct or map; failures are a *ConfigError.
func DecodeConfig(config map[string]any, out any) error {
	if config == nil {
		config = map[string]any{}
	}
	data, err := json.Marshal(config)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		return ConfigErrorf("env config: %v", err)
	}
	return nil
}

func object(v any) map[string]any {
	switch m := v.(type) {
	case map[string]any:
		return m
	case Extras:
		return m
	}
	return map[string]any{}
}

// RewardSpec is `reward_spec` ({} when absent or not an object).
func (e Extras) RewardSpec() map[string]any { return object(e["reward_spec"]) }

// ExtraInfo is `extra_info` ({} when absent or not an object).
func (e Extras) ExtraInfo() map[string]any { return object(e["extra_info"]) }

// GroundTruth is `reward_spec.ground_truth`, or nil.
func (e Extras) GroundTruth() any { return e.RewardSpec()["ground_truth"] }

// GroundTruthStr is `reward_spec.ground_truth` as text: strings as they
// are, numbers and booleans in their JSON spelling (1234 -> "1234", 7.50 ->
// "7.5", as the Rust and Python SDKs print them). Missing or structured
// values are a *ConfigError.
func (e Extras) GroundTruthStr() (string, error) {
	value := e.GroundTruth()
	if value == nil {
		return "", ConfigErrorf("extras.reward_spec.ground_truth is required")
	}
	if text, ok := ValueText(value); ok {
		return text, nil
	}
	data, _ := json.Marshal(value)
	return "", ConfigErrorf("extras.reward_spec.ground_truth must be a string or number, got %s", short(string(data)))
}

// MaxTurns is `max_turns` (set by the generator), else
// `extra_info.max_turns`, else def; integers or numeric strings, at least 1.
func (e Extras) MaxTurns(def int) (int, error) {
	value, ok := e["max_turns"]
	if !ok || value == nil {
		value = e.ExtraInfo()["max_turns"]
	}
	if value == nil {
		return def, nil
	}
	var turns int64 = -1
	switch v := value.(type) {
	case json.Number:
		turns, _ = strconv.ParseInt(v.String(), 10, 64)
	case string:
		turns, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			turns = int64(v)
		}
	case int:
		turns = int64(v)
	case int64:
		turns = v
	}
	if turns < 1 || turns > math.MaxUint32 {
		return 0, ConfigErrorf("max_turns must be a positive integer, got %v", value)
	}
	return int(turns), nil
}

// ValueText is a scalar JSON value as text: strings as they are, numbers
// and booleans in their JSON spelling; false for null, arrays and objects.
func ValueText(value any) (string, bool) {
	switch v := value.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		return numberText(v.String())
	case float64:
		return FormatFloat(v), true
	case float32:
		return FormatFloat(float64(v)), true
	case int:
		return strconv.FormatInt(int64(v), 10), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case int32:
		return strconv.FormatInt(int64(v), 10), true
	case uint:
		return strconv.FormatUint(uint64(v), 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case uint32:
		return strconv.FormatUint(uint64(v), 10), true
	}
	return "", false
}

// numberText spells a JSON number literal as serde_json (the Rust SDK)
// does: integers that fit 64 bits as integers, everything else as the
// shortest float (FormatFloat).
func numberText(literal string) (string, bool) {
	if !strings.ContainsAny(literal, ".eE") && literal != "-0" {
		if i, err := strconv.ParseInt(literal, 10, 64); err == nil {
			return strconv.FormatInt(i, 10), true
		}
		if u, err := strconv.ParseUint(literal, 10, 64); err == nil {
			return strconv.FormatUint(u, 10), true
		}
	}
	f, err := strconv.ParseFloat(literal, 64)
	if err != nil {
		return literal, true
	}
	return FormatFloat(f), true
}

// FormatFloat spells a float as serde_json / ryu do: the shortest digits
// that round-trip, `.0` on integral values (72 -> "72.0", 7.5 -> "7.5"),
// scientific past 16 digits or below 1e-5 (1e16 -> "1e16", 1e-7 -> "1e-7").
// NaN and infinities (not JSON) print as "null".
func FormatFloat(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	// d.dddde±XX: digits and the exponent of the first digit.
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	var b bytes.Buffer
	if sci[0] == '-' {
		b.WriteByte('-')
		sci = sci[1:]
	}
	mantissa, exp, _ := strings.Cut(sci, "e")
	digits := strings.Replace(mantissa, ".", "", 1)
	e, _ := strconv.Atoi(exp)
	length := len(digits)
	kk := e + 1 // 10^(kk-1) <= |f| < 10^kk
	k := kk - length
	switch {
	case k >= 0 && kk <= 16:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", k))
		b.WriteString(".0")
	case kk > 0 && kk <= 16:
		b.WriteString(digits[:kk])
		b.WriteByte('.')
		b.WriteString(digits[kk:])
	case kk > -5 && kk <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -kk))
		b.WriteString(digits)
	case length == 1:
		b.WriteString(digits)
		b.WriteString("e")
		b.WriteString(strconv.Itoa(kk - 1))
	default:
		b.WriteString(digits[:1])
		b.WriteByte('.')
		b.WriteString(digits[1:])
		b.WriteString("e")
		b.WriteString(strconv.Itoa(kk - 1))
	}
	return b.String()
}

func short(text string) string {
	text = strings.TrimSpace(text)
	if len(text) > 80 {
		return text[:80] + "..."
	}
	return text
}

// MarshalObject is value as JSON text for the host's `*-json` fields: nil
// is "{}".
func MarshalObject(value any) (string, error) {
	if value == nil {
		return "{}", nil
	}
	if m, ok := value.(map[string]any); ok && m == nil {
		return "{}", nil
	}
	data, err := json.Marshal(value)
	if err != nil {
		return "", fmt.Errorf("metadata is not JSON: %w", err)
	}
	return string(data), nil
}
