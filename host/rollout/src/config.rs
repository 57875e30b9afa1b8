//! `generator.*` and `environment.*`: how rollouts are generated (turns,
//! lengths, sampling, chat template, custom generator plugin) and what the
//! env plugins get (per-class configs, reward rubric, sandbox grants). Unknown
//! keys are refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use skyrl_inference::InferenceEngineConfig;

/// `generator.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GeneratorConfig {
    pub inference_engine: InferenceEngineConfig,
    pub n_samples_per_prompt: usize,
    pub batched: bool,
    pub max_turns: usize,
    /// null = `trainer.max_prompt_length`.
    pub max_input_length: Option<usize>,
    pub chat_template: ChatTemplateConfig,
    pub chat_template_kwargs: BTreeMap<String, Json>,
    pub sampling_params: SamplingParams,
    pub use_conversation_multi_turn: bool,
    pub append_eos_token_after_stop_str_in_multi_turn: bool,
    /// null = greedy (temperature 0) with the training max_generate_length.
    pub eval_sampling_params: Option<SamplingParams>,
    pub eval_n_samples_per_prompt: usize,
    pub zero_reward_on_non_stop: bool,
    pub apply_overlong_filtering: bool,
    pub step_wise_trajectories: bool,
    /// Settings of the generator plugin passed with `skyrl train --generator`.
    pub custom_generator: CustomGeneratorConfig,
}

/// `generator.custom_generator.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CustomGeneratorConfig {
    /// Free-form options handed to the plugin (`sampling.config`).
    pub config: Json,
    /// Limit for one `generate` call of the plugin, in seconds.
    pub timeout_s: f64,
}

impl Default for CustomGeneratorConfig {
    fn default() -> Self {
        Self {
            config: Json::Object(Default::default()),
            timeout_s: 600.0,
        }
    }
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        Self {
            inference_engine: InferenceEngineConfig::default(),
            n_samples_per_prompt: 5,
            batched: false,
            max_turns: 1,
            max_input_length: None,
            chat_template: ChatTemplateConfig::default(),
            chat_template_kwargs: BTreeMap::new(),
            sampling_params: SamplingParams::default(),
            use_conversation_multi_turn: true,
            append_eos_token_after_stop_str_in_multi_turn: true,
            eval_sampling_params: None,
            eval_n_samples_per_prompt: 1,
            zero_reward_on_non_stop: false,
            apply_overlong_filtering: false,
            step_wise_trajectories: false,
            custom_generator: CustomGeneratorConfig::default(),
        }
    }
}

/// `generator.sampling_params.*` / `generator.eval_sampling_params.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingParams {
    pub max_generate_length: usize,
    pub repetition_penalty: f64,
    pub temperature: f64,
    pub top_p: f64,
    pub min_p: f64,
    /// -1 disables top-k.
    pub top_k: i64,
    /// null = do not return logprobs.
    pub logprobs: Option<i64>,
    pub stop: Option<Vec<String>>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            max_generate_length: 1024,
            repetition_penalty: 1.0,
            temperature: 1.0,
            top_p: 1.0,
            min_p: 0.0,
            top_k: -1,
            logprobs: Some(1),
            stop: None,
        }
    }
}

/// `generator.chat_template.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChatTemplateConfig {
    /// `name` or `file`.
    pub source: String,
    pub name_or_path: Option<String>,
}

/// Largest chat template file read (skyrl-train's limit).
pub const MAX_CHAT_TEMPLATE_BYTES: u64 = 1024 * 1024;

impl ChatTemplateConfig {
    /// The rollout chat template this names: one of skyrl-train's named
    /// templates (`source: name`) or a file's text (`source: file`, `~`
    /// expanded, relative to the working directory); `None` when
    /// `name_or_path` is null (the model's own template). Errors name the key.
    pub fn resolve(&self) -> Result<Option<String>, String> {
        let Some(name) = self.name_or_path.as_deref().filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        let key = "generator.chat_template.name_or_path";
        match self.source.as_str() {
            "name" => skyrl_model::custom_chat_template(name)
                .map(|t| Some(t.to_string()))
                .ok_or_else(|| {
                    format!(
                        "{key}: no chat template named `{name}`; known: {} (or set generator.chat_template.source=file)",
                        skyrl_model::CUSTOM_CHAT_TEMPLATE_NAMES.join(", ")
                    )
                }),
            "file" => {
                let path = match name.strip_prefix("~/") {
                    Some(rest) => std::env::var_os("HOME")
                        .map(|h| std::path::PathBuf::from(h).join(rest))
                        .unwrap_or_else(|| name.into()),
                    None => name.into(),
                };
                let meta = std::fs::metadata(&path)
                    .map_err(|e| format!("{key}: cannot read the template file {}: {e}", path.display()))?;
                if !meta.is_file() {
                    return Err(format!("{key}: {} is not a regular file", path.display()));
                }
                if meta.len() > MAX_CHAT_TEMPLATE_BYTES {
                    return Err(format!(
                        "{key}: {} is {} bytes, over the {MAX_CHAT_TEMPLATE_BYTES}-byte limit for a chat template",
                        path.display(),
                        meta.len()
                    ));
                }
                std::fs::read_to_string(&path)
                    .map(Some)
                    .map_err(|e| format!("{key}: cannot read the template file {}: {e}", path.display()))
            }
            other => Err(format!(
                "generator.chat_template.source must be `name` or `file`, got `{other}`"
            )),
        }
    }
}

impl Default for ChatTemplateConfig {
    fn default() -> Self {
        Self {
            source: "name".into(),
            name_or_path: None,
        }
    }
}

/// `environment.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvironmentConfig {
    /// Default env class for rows whose dataset `env_class` is empty.
    pub env_class: String,
    pub skyrl_gym: SkyrlGymConfig,
    /// Extra reward plugins composed with the env's reward (null = env reward only).
    pub reward_rubric: Option<RubricConfig>,
    /// Sandbox grants and limits per plugin, keyed by plugin name or env
    /// class (`environment.sandbox.<name>.*`).
    pub sandbox: BTreeMap<String, PluginSandboxConfig>,
}

/// `environment.sandbox.<name>`: what one plugin's sandbox may read and how
/// much it may use; unset limits keep the engine defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginSandboxConfig {
    /// Host directories the plugin sees read-only.
    pub read_only_dirs: Vec<DirGrant>,
    /// Linear memory cap per instance, bytes.
    pub memory_bytes: Option<usize>,
    /// Wall-clock deadline per call, milliseconds.
    pub call_timeout_ms: Option<u64>,
    /// Fuel (about one per wasm instruction) per call.
    pub fuel_per_call: Option<u64>,
    /// Origins the plugin may reach over HTTP (`wasi:http`), Spin-style:
    /// `http://127.0.0.1:8000`, `https://*.example.com`, `http://localhost:*`.
    /// Empty (the default): no network.
    pub allowed_hosts: Vec<String>,
    /// Deadline per HTTP request, milliseconds (default 30000; never past
    /// the call's own deadline).
    pub http_timeout_ms: Option<u64>,
    /// Largest HTTP response body accepted, bytes (default 8 MiB).
    pub http_max_response_bytes: Option<usize>,
    /// Episodes one env sandbox may serve (default 1: a fresh sandbox per
    /// episode). Above 1, a sandbox whose episode closed cleanly serves the
    /// next one, skipping instantiation (about 1.5 ms for a Python env);
    /// guest globals then carry over between episodes, as in skyrl-gym's
    /// one Python process. Trapped sandboxes are never reused.
    pub episodes_per_instance: Option<u32>,
}

/// One read-only directory grant: `{host: dir, guest: /data}`, or just a
/// path, which the plugin then sees at the same absolute path as the host
/// (so a path in an env config, such as SkyRL's `text2sql.db_path`, means the
/// same inside and outside the sandbox).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "DirGrantSpec", into = "DirGrantSpec")]
pub struct DirGrant {
    /// Directory on the host (`~` and paths relative to the working directory allowed).
    pub host: String,
    /// Where the plugin sees it, e.g. `/data`; `None` (the plain-path form):
    /// the host directory's absolute path.
    pub guest: Option<String>,
}

/// How a [`DirGrant`] is written in a config.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum DirGrantSpec {
    /// `- /home/me/sql_data`
    SamePath(String),
    /// `- {host: data/dbs, guest: /data}`
    Mapped(MappedDirGrant),
}

/// The `{host, guest}` form of a [`DirGrant`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MappedDirGrant {
    host: String,
    guest: String,
}

impl From<DirGrant> for DirGrantSpec {
    fn from(grant: DirGrant) -> Self {
        match grant.guest {
            None => DirGrantSpec::SamePath(grant.host),
            Some(guest) => DirGrantSpec::Mapped(MappedDirGrant {
                host: grant.host,
                guest,
            }),
        }
    }
}

impl From<DirGrantSpec> for DirGrant {
    fn from(spec: DirGrantSpec) -> Self {
        match spec {
            DirGrantSpec::SamePath(host) => DirGrant { host, guest: None },
            DirGrantSpec::Mapped(MappedDirGrant { host, guest }) => DirGrant {
                host,
                guest: Some(guest),
            },
        }
    }
}

impl Default for EnvironmentConfig {
    fn default() -> Self {
        Self {
            env_class: "gsm8k".into(),
            skyrl_gym: SkyrlGymConfig::default(),
            reward_rubric: None,
            sandbox: BTreeMap::new(),
        }
    }
}

/// `environment.reward_rubric`: reward = `env_weight` x env reward + the
/// weighted sum of the components' scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RubricConfig {
    pub env_weight: f64,
    pub components: Vec<RubricComponent>,
}

impl Default for RubricConfig {
    fn default() -> Self {
        Self {
            env_weight: 1.0,
            components: Vec::new(),
        }
    }
}

/// One rubric component: a reward plugin (`skyrl train --reward NAME=PATH`) and its weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RubricComponent {
    pub name: String,
    pub weight: f64,
}

/// `environment.skyrl_gym.*`: worker count plus one free-form JSON object per env
/// class (`environment.skyrl_gym.<env_class>.*`), handed to that env unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SkyrlGymConfig {
    pub max_env_workers: usize,
    #[serde(flatten)]
    pub envs: BTreeMap<String, Json>,
}

impl Default for SkyrlGymConfig {
    fn default() -> Self {
        Self {
            max_env_workers: 32,
            envs: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod dir_grant_tests {
    use super::DirGrant;

    #[test]
    fn both_forms_read_and_write_back() {
        let same: DirGrant = serde_json::from_str(r#""/srv/sql_data""#).unwrap();
        assert_eq!(same.guest, None);
        let mapped: DirGrant =
            serde_json::from_str(r#"{"host": "data", "guest": "/data"}"#).unwrap();
        assert_eq!(mapped.guest.as_deref(), Some("/data"));
        for grant in [same, mapped] {
            let text = serde_json::to_string(&grant).unwrap();
            assert_eq!(serde_json::from_str::<DirGrant>(&text).unwrap(), grant);
        }
        assert!(serde_json::from_str::<DirGrant>(r#"{"host": "data", "gust": "/d"}"#).is_err());
    }
}
