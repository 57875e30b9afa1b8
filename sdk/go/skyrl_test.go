package skyrl

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestGroundTruthStr(t *testing.T) {
	cases := map[string]string{
		`{"reward_spec":{"ground_truth":"72"}}`:                 "72",
		`{"reward_spec":{"ground_truth":1234}}`:                 "1234",
		`{"reward_spec":{"ground_truth":-7}}`:                   "-7",
		`{"reward_spec":{"ground_truth":7.50}}`:                 "7.5",
		`{"reward_spec":{"ground_truth":72.0}}`:                 "72.0",
		`{"reward_spec":{"ground_truth":1e3}}`:                  "1000.0",
		`{"reward_spec":{"ground_truth":1e16}}`:                 "1e16",
		`{"reward_spec":{"ground_truth":1.5e17}}`:               "1.5e17",
		`{"reward_spec":{"ground_truth":0.0001}}`:               "0.0001",
		`{"reward_spec":{"ground_truth":1e-7}}`:                 "1e-7",
		`{"reward_spec":{"ground_truth":-0}}`:                   "-0.0",
		`{"reward_spec":{"ground_truth":true}}`:                 "true",
		`{"reward_spec":{"ground_truth":" 7 "}}`:                " 7 ",
		`{"reward_spec":{"ground_truth":18446744073709551615}}`: "18446744073709551615",
		`{"reward_spec":{"ground_truth":18446744073709551616}}`: "1.8446744073709552e19",
	}
	for in, want := range cases {
		extras, err := ParseExtras(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := extras.GroundTruthStr()
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`{"reward_spec":{}}`, `{}`, ``, `{"reward_spec":{"ground_truth":null}}`, `{"reward_spec":{"ground_truth":[1]}}`} {
		extras, err := ParseExtras(in)
		if err != nil {
			t.Fatal(err)
		}
		_, err = extras.GroundTruthStr()
		kind, msg := Classify(err)
		if kind != ErrInvalidConfig || !strings.Contains(msg, "ground_truth") {
			t.Errorf("%s: got %v %q", in, kind, msg)
		}
	}
}

func TestParseObject(t *testing.T) {
	for _, in := range []string{"[1]", "3", "{", "{} {}"} {
		if _, err := ParseObject(in, "extras"); err == nil {
			t.Errorf("%q parsed", in)
		} else if kind, _ := Classify(err); kind != ErrInvalidConfig {
			t.Errorf("%q: kind %v", in, kind)
		}
	}
	m, err := ParseObject("null", "extras")
	if err != nil || len(m) != 0 {
		t.Errorf("null: %v %v", m, err)
	}
}

func TestMaxTurns(t *testing.T) {
	e, _ := ParseExtras(`{"max_turns": 3, "extra_info": {"max_turns": 5}}`)
	if n, err := e.MaxTurns(1); n != 3 || err != nil {
		t.Errorf("%v %v", n, err)
	}
	e, _ = ParseExtras(`{"extra_info": {"max_turns": "5"}}`)
	if n, err := e.MaxTurns(1); n != 5 || err != nil {
		t.Errorf("%v %v", n, err)
	}
	e, _ = ParseExtras(`{}`)
	if n, err := e.MaxTurns(2); n != 2 || err != nil {
		t.Errorf("%v %v", n, err)
	}
	e, _ = ParseExtras(`{"max_turns": 0}`)
	if _, err := e.MaxTurns(2); err == nil {
		t.Error("0 accepted")
	}
}

func TestClassify(t *testing.T) {
	if k, m := Classify(ConfigErrorf("bad %d", 1)); k != ErrInvalidConfig || m != "bad 1" {
		t.Error(k, m)
	}
	if k, m := Classify(fmt.Errorf("ctx: %w", InputErrorf("x"))); k != ErrInvalidInput || m != "ctx: invalid input: x" {
		t.Error(k, m)
	}
	if k, m := Classify(errors.New("boom")); k != ErrFailed || m != "boom" {
		t.Error(k, m)
	}
}

type echo struct {
	BaseEnv
	target string
}

func (e *echo) Step(action string) (StepOutput, error) {
	if action == e.target {
		return Final(1), nil
	}
	return Final(0), nil
}

func TestBaseEnv(t *testing.T) {
	var env Environment = &echo{target: "x"}
	prompt := []Message{User("q")}
	p, meta, err := env.Init(prompt)
	if err != nil || len(p) != 1 || p[0] != User("q") || meta == nil || len(meta) != 0 {
		t.Errorf("%v %v %v", p, meta, err)
	}
	out, _ := env.Step("x")
	if !out.Done || out.Reward != 1 {
		t.Error(out)
	}
	if s, _ := MarshalObject(out.Metadata); s != "{}" {
		t.Error(s)
	}
}

func TestCallToolWithoutHost(t *testing.T) {
	if _, err := CallTool("python", map[string]any{"code": "1"}); !errors.Is(err, ErrNoHost) {
		t.Error(err)
	}
}
