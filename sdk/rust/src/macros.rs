//! Export macros (one per plugin kind) and logging macros.

/// Exports an [`Environment`](crate::Environment) type as the plugin's
/// `environment-plugin` world.
///
/// ```ignore
/// skyrl_sdk::export_env!(Gsm8k, name = "gsm8k", version = "0.1.0", description = "GSM8K math");
/// skyrl_sdk::export_env!(Agent, name = "agent", version = "0.1.0", description = "...",
///                        uses_tools = ["calculator"]);
/// ```
#[macro_export]
macro_rules! export_env {
    ($ty:ty, name = $name:expr, version = $version:expr, description = $description:expr
     $(, uses_tools = [$($tool:expr),* $(,)?])? $(,)?) => {
        const _: () = {
            struct __SkyrlEnvPlugin;
            impl $crate::bindings::exports::skyrl::plugin::plugin::Guest for __SkyrlEnvPlugin {
                fn info() -> $crate::PluginInfo {
                    $crate::PluginInfo::new($crate::PluginKind::Environment, $name, $version, $description,
                                            &[$($($tool),*)?])
                }
            }
            impl $crate::bindings::exports::skyrl::plugin::environment::Guest for __SkyrlEnvPlugin {
                type Env = $crate::EnvResource<$ty>;
            }
            $crate::__export_world!(__SkyrlEnvPlugin, ENV_WORLD, ENV_WORLD_LEN,
                "component-type:skyrl-sdk:skyrl:plugin@0.1.2:environment-plugin:encoded world",
                plugin, __export_skyrl_plugin_plugin_0_1_2_cabi,
                environment, __export_skyrl_plugin_environment_0_1_2_cabi);
        };
    };
}

/// Exports a [`Tool`](crate::Tool) type as the plugin's `tool-plugin` world.
///
/// ```ignore
/// skyrl_sdk::export_tool!(Calculator, name = "calculator", version = "0.1.0", description = "...");
/// ```
#[macro_export]
macro_rules! export_tool {
    ($ty:ty, name = $name:expr, version = $version:expr, description = $description:expr
     $(, uses_tools = [$($tool:expr),* $(,)?])? $(,)?) => {
        const _: () = {
            struct __SkyrlToolPlugin;
            impl $crate::bindings::exports::skyrl::plugin::plugin::Guest for __SkyrlToolPlugin {
                fn info() -> $crate::PluginInfo {
                    $crate::PluginInfo::new($crate::PluginKind::Tool, $name, $version, $description,
                                            &[$($($tool),*)?])
                }
            }
            impl $crate::bindings::exports::skyrl::plugin::tool::Guest for __SkyrlToolPlugin {
                fn specs() -> ::std::vec::Vec<$crate::bindings::exports::skyrl::plugin::tool::ToolSpec> {
                    $crate::specs_of::<$ty>()
                }
                fn call(
                    name: ::std::string::String,
                    args_json: ::std::string::String,
                ) -> ::std::result::Result<::std::string::String, $crate::bindings::skyrl::plugin::types::PluginError> {
                    $crate::call_with::<$ty>(&name, &args_json)
                }
            }
            $crate::__export_world!(__SkyrlToolPlugin, TOOL_WORLD, TOOL_WORLD_LEN,
                "component-type:skyrl-sdk:skyrl:plugin@0.1.2:tool-plugin:encoded world",
                plugin, __export_skyrl_plugin_plugin_0_1_2_cabi,
                tool, __export_skyrl_plugin_tool_0_1_2_cabi);
        };
    };
}

/// Exports a [`Reward`](crate::Reward) type as the plugin's `reward-plugin`
/// world.
///
/// ```ignore
/// skyrl_sdk::export_reward!(Gsm8kReward, name = "gsm8k_reward", version = "0.1.0", description = "...");
/// ```
#[macro_export]
macro_rules! export_reward {
    ($ty:ty, name = $name:expr, version = $version:expr, description = $description:expr
     $(, uses_tools = [$($tool:expr),* $(,)?])? $(,)?) => {
        const _: () = {
            struct __SkyrlRewardPlugin;
            impl $crate::bindings::exports::skyrl::plugin::plugin::Guest for __SkyrlRewardPlugin {
                fn info() -> $crate::PluginInfo {
                    $crate::PluginInfo::new($crate::PluginKind::Reward, $name, $version, $description,
                                            &[$($($tool),*)?])
                }
            }
            impl $crate::bindings::exports::skyrl::plugin::reward::Guest for __SkyrlRewardPlugin {
                fn score(
                    prompt: ::std::vec::Vec<$crate::Message>,
                    response: ::std::string::String,
                    ground_truth_json: ::std::string::String,
                    extras_json: ::std::string::String,
                ) -> ::std::result::Result<f64, $crate::bindings::skyrl::plugin::types::PluginError> {
                    $crate::score_with::<$ty>(&prompt, &response, &ground_truth_json, &extras_json)
                }
            }
            $crate::__export_world!(__SkyrlRewardPlugin, REWARD_WORLD, REWARD_WORLD_LEN,
                "component-type:skyrl-sdk:skyrl:plugin@0.1.2:reward-plugin:encoded world",
                plugin, __export_skyrl_plugin_plugin_0_1_2_cabi,
                reward, __export_skyrl_plugin_reward_0_1_2_cabi);
        };
    };
}

/// Exports a [`Generator`](crate::Generator) type as the plugin's
/// `generator-plugin` world.
#[macro_export]
macro_rules! export_generator {
    ($ty:ty, name = $name:expr, version = $version:expr, description = $description:expr $(,)?) => {
        const _: () = {
            struct __SkyrlGeneratorPlugin;
            impl $crate::bindings::exports::skyrl::plugin::plugin::Guest for __SkyrlGeneratorPlugin {
                fn info() -> $crate::PluginInfo {
                    $crate::PluginInfo::new($crate::PluginKind::Generator, $name, $version, $description, &[])
                }
            }
            impl $crate::bindings::exports::skyrl::plugin::generator::Guest for __SkyrlGeneratorPlugin {
                fn generate(
                    prompts: ::std::vec::Vec<$crate::bindings::exports::skyrl::plugin::generator::GeneratorPrompt>,
                    sampling_json: ::std::string::String,
                ) -> ::std::result::Result<
                    ::std::vec::Vec<$crate::bindings::exports::skyrl::plugin::generator::Trajectory>,
                    $crate::bindings::skyrl::plugin::types::PluginError,
                > {
                    $crate::generate_with::<$ty>(prompts, &sampling_json)
                }
            }
            $crate::__export_world!(__SkyrlGeneratorPlugin, GENERATOR_WORLD, GENERATOR_WORLD_LEN,
                "component-type:skyrl-sdk:skyrl:plugin@0.1.2:generator-plugin:encoded world",
                plugin, __export_skyrl_plugin_plugin_0_1_2_cabi,
                generator, __export_skyrl_plugin_generator_0_1_2_cabi);
        };
    };
}

/// Exports algorithm types as the plugin's `advantage-plugin`,
/// `policy-loss-plugin` or (both given) `algorithm-plugin` world.
///
/// ```ignore
/// skyrl_sdk::export_algorithm!(name = "grpo_rs", version = "0.1.0", description = "...",
///                              advantage = Grpo);
/// skyrl_sdk::export_algorithm!(name = "ppo_rs", version = "0.1.0", description = "...",
///                              policy_loss = PpoClip);
/// skyrl_sdk::export_algorithm!(name = "algos", version = "0.1.0", description = "...",
///                              advantage = Grpo, policy_loss = PpoClip);
/// ```
#[macro_export]
macro_rules! export_algorithm {
    (name = $name:expr, version = $version:expr, description = $description:expr,
     advantage = $adv:ty, policy_loss = $loss:ty $(,)?) => {
        const _: () = {
            struct __SkyrlAlgorithmPlugin;
            $crate::__algorithm_info!(__SkyrlAlgorithmPlugin, $name, $version, $description);
            $crate::__advantage_glue!(__SkyrlAlgorithmPlugin, $adv);
            $crate::__loss_glue!(__SkyrlAlgorithmPlugin, $loss);
            $crate::__export_world!(
                __SkyrlAlgorithmPlugin,
                ALGORITHM_WORLD,
                ALGORITHM_WORLD_LEN,
                "component-type:skyrl-sdk:skyrl:plugin@0.1.2:algorithm-plugin:encoded world",
                algorithm,
                __export_skyrl_plugin_algorithm_0_1_2_cabi,
                advantage,
                __export_skyrl_plugin_advantage_0_1_2_cabi,
                policy_loss,
                __export_skyrl_plugin_policy_loss_0_1_2_cabi
            );
        };
    };
    (name = $name:expr, version = $version:expr, description = $description:expr,
     advantage = $adv:ty $(,)?) => {
        const _: () = {
            struct __SkyrlAlgorithmPlugin;
            $crate::__algorithm_info!(__SkyrlAlgorithmPlugin, $name, $version, $description);
            $crate::__advantage_glue!(__SkyrlAlgorithmPlugin, $adv);
            $crate::__export_world!(
                __SkyrlAlgorithmPlugin,
                ADVANTAGE_WORLD,
                ADVANTAGE_WORLD_LEN,
                "component-type:skyrl-sdk:skyrl:plugin@0.1.2:advantage-plugin:encoded world",
                algorithm,
                __export_skyrl_plugin_algorithm_0_1_2_cabi,
                advantage,
                __export_skyrl_plugin_advantage_0_1_2_cabi
            );
        };
    };
    (name = $name:expr, version = $version:expr, description = $description:expr,
     policy_loss = $loss:ty $(,)?) => {
        const _: () = {
            struct __SkyrlAlgorithmPlugin;
            $crate::__algorithm_info!(__SkyrlAlgorithmPlugin, $name, $version, $description);
            $crate::__loss_glue!(__SkyrlAlgorithmPlugin, $loss);
            $crate::__export_world!(
                __SkyrlAlgorithmPlugin,
                POLICY_LOSS_WORLD,
                POLICY_LOSS_WORLD_LEN,
                "component-type:skyrl-sdk:skyrl:plugin@0.1.2:policy-loss-plugin:encoded world",
                algorithm,
                __export_skyrl_plugin_algorithm_0_1_2_cabi,
                policy_loss,
                __export_skyrl_plugin_policy_loss_0_1_2_cabi
            );
        };
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __algorithm_info {
    ($glue:ident, $name:expr, $version:expr, $description:expr) => {
        impl $crate::bindings::exports::skyrl::plugin::algorithm::Guest for $glue {
            fn info() -> $crate::AlgorithmInfo {
                $crate::info_of($name, $version, $description)
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __advantage_glue {
    ($glue:ident, $adv:ty) => {
        impl $crate::bindings::exports::skyrl::plugin::advantage::Guest for $glue {
            fn compute(
                input: $crate::bindings::exports::skyrl::plugin::advantage::AdvantageInput,
            ) -> ::std::result::Result<
                $crate::bindings::exports::skyrl::plugin::advantage::AdvantageOutput,
                $crate::bindings::skyrl::plugin::types::PluginError,
            > {
                $crate::advantage_with::<$adv>(input)
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __loss_glue {
    ($glue:ident, $loss:ty) => {
        impl $crate::bindings::exports::skyrl::plugin::policy_loss::Guest for $glue {
            fn compute(
                input: $crate::bindings::exports::skyrl::plugin::policy_loss::LossInput,
            ) -> ::std::result::Result<
                $crate::bindings::exports::skyrl::plugin::policy_loss::LossOutput,
                $crate::bindings::skyrl::plugin::types::PluginError,
            > {
                $crate::loss_with::<$loss>(input)
            }
        }
    };
}

/// Emits the exported functions of the given interfaces and the world's
/// component-type custom section. Internal to the export macros.
///
/// Only on wasm: native builds (unit tests of a plugin's `rlib`) cannot link
/// symbols named like `skyrl:plugin/environment@0.1.2#[method]env.step`.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_world {
    ($glue:ident, $world:ident, $world_len:ident, $section:literal, $($iface:ident, $cabi:ident),+) => {
        $(
            #[cfg(target_arch = "wasm32")]
            $crate::bindings::exports::skyrl::plugin::$iface::$cabi!(
                $glue with_types_in $crate::bindings::exports::skyrl::plugin::$iface);
        )+
        #[cfg(target_arch = "wasm32")]
        #[unsafe(link_section = $section)]
        #[used]
        static __SKYRL_COMPONENT_TYPE: [u8; $crate::__rt::$world_len] = $crate::__rt::$world;
    };
}

/// Logs a `format!` message at trace level through the host.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)*) => { $crate::log::trace(&::std::format!($($arg)*)) };
}

/// Logs a `format!` message at debug level through the host.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log::debug(&::std::format!($($arg)*)) };
}

/// Logs a `format!` message at info level through the host.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::info(&::std::format!($($arg)*)) };
}

/// Logs a `format!` message at warn level through the host.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log::warn(&::std::format!($($arg)*)) };
}

/// Logs a `format!` message at error level through the host.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log::error(&::std::format!($($arg)*)) };
}
