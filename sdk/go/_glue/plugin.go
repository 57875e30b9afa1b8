package export_skyrl_plugin_plugin

import (
	"skyrl.dev/bindings/imports/skyrl_plugin_types"
	"skyrl.dev/bindings/skyrlglue"
)

// Info is the `plugin.info` export.
func Info() skyrl_plugin_types.PluginInfo { return skyrlglue.Info() }
