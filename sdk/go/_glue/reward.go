package export_skyrl_plugin_reward

import (
	"encoding/json"
	"strings"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"skyrl.dev/bindings/imports/skyrl_plugin_types"
	"skyrl.dev/bindings/skyrlglue"
	skyrl "skyrl.dev/sdk"
)

type pluginError = skyrl_plugin_types.PluginError

// Score is `reward.score`.
func Score(prompt []skyrl_plugin_types.Message, response string, groundTruthJson string, extrasJson string) (result witTypes.Result[float64, pluginError]) {
	defer func() {
		if r := recover(); r != nil {
			result = witTypes.Err[float64](skyrlglue.Panic(r))
		}
	}()
	fail := func(err error) witTypes.Result[float64, pluginError] {
		return witTypes.Err[float64](skyrlglue.Error(err))
	}
	reg, err := skyrl.RegisteredAs(skyrl.KindReward)
	if err != nil {
		return fail(err)
	}
	var truth any
	if strings.TrimSpace(groundTruthJson) != "" {
		decoder := json.NewDecoder(strings.NewReader(groundTruthJson))
		decoder.UseNumber()
		if err := decoder.Decode(&truth); err != nil {
			return fail(skyrl.ConfigErrorf("ground truth is not JSON: %v", err))
		}
	}
	extras, err := skyrl.ParseExtras(extrasJson)
	if err != nil {
		return fail(err)
	}
	score, err := reg.Reward.Score(skyrlglue.FromWit(prompt), response, truth, extras)
	if err != nil {
		return fail(err)
	}
	return witTypes.Ok[float64, pluginError](score)
}
