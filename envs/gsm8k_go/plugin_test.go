package main

import (
	"testing"

	skyrl "skyrl.dev/sdk"
)

func TestGsm8k(t *testing.T) {
	reg, err := skyrl.RegisteredAs(skyrl.KindEnvironment)
	if err != nil {
		t.Fatal(err)
	}
	extras, _ := skyrl.ParseExtras(`{"reward_spec":{"ground_truth":1234}}`)
	env, err := reg.NewEnv(map[string]any{}, extras)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := env.Step("#### 1,234"); out.Reward != 1 || !out.Done {
		t.Errorf("%+v", out)
	}
	extras, _ = skyrl.ParseExtras(`{"reward_spec":{}}`)
	if _, err := reg.NewEnv(nil, extras); err == nil {
		t.Error("missing ground truth accepted")
	}
}
