package export_skyrl_plugin_tool

import (
	"encoding/json"
	"strings"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"skyrl.dev/bindings/imports/skyrl_plugin_tool"
	"skyrl.dev/bindings/imports/skyrl_plugin_types"
	"skyrl.dev/bindings/skyrlglue"
	skyrl "skyrl.dev/sdk"
)

type pluginError = skyrl_plugin_types.PluginError

// Specs is `tool.specs`.
func Specs() (result []skyrl_plugin_tool.ToolSpec) {
	defer func() {
		if r := recover(); r != nil {
			skyrlglue.LogPanic("Specs", r)
			result = []skyrl_plugin_tool.ToolSpec{}
		}
	}()
	reg, err := skyrl.RegisteredAs(skyrl.KindTool)
	if err != nil {
		panic(err.Error())
	}
	specs := reg.Tool.Specs()
	out := make([]skyrl_plugin_tool.ToolSpec, 0, len(specs))
	for _, s := range specs {
		parameters := `{"type":"object"}`
		if s.Parameters != nil {
			data, err := json.Marshal(s.Parameters)
			if err != nil {
				panic("tool " + s.Name + ": parameters are not JSON: " + err.Error())
			}
			parameters = string(data)
		}
		out = append(out, skyrl_plugin_tool.ToolSpec{Name: s.Name, Description: s.Description, ParametersJson: parameters})
	}
	return out
}

// Call is `tool.call`.
func Call(name string, argsJson string) (result witTypes.Result[string, pluginError]) {
	defer func() {
		if r := recover(); r != nil {
			result = witTypes.Err[string](skyrlglue.Panic(r))
		}
	}()
	fail := func(err error) witTypes.Result[string, pluginError] {
		return witTypes.Err[string](skyrlglue.Error(err))
	}
	reg, err := skyrl.RegisteredAs(skyrl.KindTool)
	if err != nil {
		return fail(err)
	}
	args, err := skyrl.ParseObject(argsJson, "tool arguments")
	if err != nil {
		_, message := skyrl.Classify(err)
		return fail(&skyrl.InputError{Message: strings.TrimPrefix(message, "invalid config: ")})
	}
	value, err := reg.Tool.Call(name, args)
	if err != nil {
		return fail(err)
	}
	switch v := value.(type) {
	case string:
		return witTypes.Ok[string, pluginError](v)
	case []byte:
		return witTypes.Ok[string, pluginError](string(v))
	}
	data, err := json.Marshal(value)
	if err != nil {
		return fail(err)
	}
	return witTypes.Ok[string, pluginError](string(data))
}
