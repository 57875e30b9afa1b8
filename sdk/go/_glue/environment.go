package export_skyrl_plugin_environment

import (
	"fmt"
	"runtime"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"skyrl.dev/bindings/imports/skyrl_plugin_environment"
	"skyrl.dev/bindings/imports/skyrl_plugin_types"
	"skyrl.dev/bindings/skyrlglue"
	skyrl "skyrl.dev/sdk"
)

type pluginError = skyrl_plugin_types.PluginError

// Env is the WIT `env` resource wrapping the registered skyrl.Environment.
type Env struct {
	pinner runtime.Pinner
	handle int32
	inner  skyrl.Environment
}

// OnDrop releases the environment when the host drops the resource.
func (self *Env) OnDrop() { self.inner = nil }

// EnvCreate is `env.create`.
func EnvCreate(configJson string, extrasJson string) (result witTypes.Result[*Env, pluginError]) {
	defer func() {
		if r := recover(); r != nil {
			result = witTypes.Err[*Env](skyrlglue.Panic(r))
		}
	}()
	fail := func(err error) witTypes.Result[*Env, pluginError] {
		return witTypes.Err[*Env](skyrlglue.Error(err))
	}
	reg, err := skyrl.RegisteredAs(skyrl.KindEnvironment)
	if err != nil {
		return fail(err)
	}
	config, err := skyrl.ParseObject(configJson, "env config")
	if err != nil {
		return fail(err)
	}
	extras, err := skyrl.ParseExtras(extrasJson)
	if err != nil {
		return fail(err)
	}
	inner, err := reg.NewEnv(config, extras)
	if err != nil {
		return fail(err)
	}
	if inner == nil {
		return fail(fmt.Errorf("the env factory returned no Environment"))
	}
	return witTypes.Ok[*Env, pluginError](&Env{inner: inner})
}

func (self *Env) env() skyrl.Environment {
	if self.inner == nil {
		panic("the environment was closed")
	}
	return self.inner
}

// Init is `env.init`.
func (self *Env) Init(prompt []skyrl_plugin_types.Message) (result witTypes.Result[skyrl_plugin_environment.InitOutput, pluginError]) {
	type out = skyrl_plugin_environment.InitOutput
	defer func() {
		if r := recover(); r != nil {
			result = witTypes.Err[out](skyrlglue.Panic(r))
		}
	}()
	messages, metadata, err := self.env().Init(skyrlglue.FromWit(prompt))
	if err != nil {
		return witTypes.Err[out](skyrlglue.Error(err))
	}
	metadataJson, err := skyrl.MarshalObject(metadata)
	if err != nil {
		return witTypes.Err[out](skyrlglue.Error(err))
	}
	return witTypes.Ok[out, pluginError](out{Prompt: skyrlglue.ToWit(messages), MetadataJson: metadataJson})
}

// Step is `env.step`.
func (self *Env) Step(action string) (result witTypes.Result[skyrl_plugin_environment.StepOutput, pluginError]) {
	type out = skyrl_plugin_environment.StepOutput
	defer func() {
		if r := recover(); r != nil {
			result = witTypes.Err[out](skyrlglue.Panic(r))
		}
	}()
	step, err := self.env().Step(action)
	if err != nil {
		return witTypes.Err[out](skyrlglue.Error(err))
	}
	metadataJson, err := skyrl.MarshalObject(step.Metadata)
	if err != nil {
		return witTypes.Err[out](skyrlglue.Error(err))
	}
	return witTypes.Ok[out, pluginError](out{
		Observations: skyrlglue.ToWit(step.Observations),
		Reward:       step.Reward,
		Done:         step.Done,
		MetadataJson: metadataJson,
	})
}

// Close is `env.close`.
func (self *Env) Close() {
	defer func() {
		if r := recover(); r != nil {
			skyrlglue.LogPanic("Close", r)
		}
	}()
	if self.inner != nil {
		self.inner.Close()
	}
}

// Metrics is `env.metrics`: a JSON object, {} when the env has none.
func (self *Env) Metrics() (result string) {
	defer func() {
		if r := recover(); r != nil {
			skyrlglue.LogPanic("Metrics", r)
			result = "{}"
		}
	}()
	if self.inner == nil {
		return "{}"
	}
	text, err := skyrl.MarshalObject(self.inner.Metrics())
	if err != nil {
		skyrl.Logf(skyrl.LevelWarn, "Metrics: %v", err)
		return "{}"
	}
	return text
}
