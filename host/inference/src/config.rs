//! `generator.inference_engine.*`: how many engines, where they run, how
//! they are reached and how weights get to them. Unknown keys are refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// `generator.inference_engine.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InferenceEngineConfig {
    pub model_dtype: String,
    pub run_engines_locally: bool,
    pub num_engines: usize,
    /// `tch` (the libtorch engine, in process or `skyrl serve`) or `vllm`
    /// (`vllm serve` processes, or external vLLM servers driven with vLLM's
    /// control endpoints).
    pub backend: String,
    /// `colocated` (in-process engine), `checkpoint` (safetensors + reload) or `nccl`.
    pub weight_sync_backend: String,
    /// Directory for `checkpoint` weight sync; every engine must read it
    /// (null = `<trainer.export_path>/weight_sync`).
    pub weight_sync_path: Option<String>,
    /// Seconds one request to a remote engine may take.
    pub request_timeout_s: f64,
    /// Extra attempts after a failed remote request (other servers first).
    pub max_retries: u32,
    /// First retry backoff in seconds (doubles per attempt).
    pub retry_backoff_s: f64,
    /// Seconds to wait for engines to come up (`/health`).
    pub engine_startup_timeout_s: f64,
    /// Bearer token for remote engines started with `--api-key` (null:
    /// `$SKYRL_API_KEY`). Servers the trainer starts get fresh keys.
    pub api_key: Option<String>,
    /// Bearer token of remote engines' control endpoints (`skyrl serve
    /// --admin-key`; null: `$SKYRL_ADMIN_KEY`, else the API key).
    pub admin_key: Option<String>,
    pub tensor_parallel_size: usize,
    /// vLLM's pipeline / expert / data parallelism of one engine: only 1
    /// (none) is supported; larger values are refused at load time.
    pub pipeline_parallel_size: usize,
    pub expert_parallel_size: usize,
    pub data_parallel_size: usize,
    pub async_engine: bool,
    pub enable_prefix_caching: bool,
    pub max_num_batched_tokens: usize,
    pub max_num_seqs: usize,
    pub gpu_memory_utilization: f64,
    pub enforce_eager: bool,
    pub remote_urls: Vec<String>,
    pub enable_http_endpoint: bool,
    pub http_endpoint_host: String,
    pub http_endpoint_port: u16,
    pub served_model_name: Option<String>,
    /// Pass-through engine arguments.
    pub engine_init_kwargs: BTreeMap<String, Json>,
}

impl Default for InferenceEngineConfig {
    fn default() -> Self {
        Self {
            model_dtype: "bfloat16".into(),
            run_engines_locally: true,
            num_engines: 1,
            backend: "tch".into(),
            weight_sync_backend: "colocated".into(),
            weight_sync_path: None,
            request_timeout_s: 600.0,
            max_retries: 3,
            retry_backoff_s: 0.5,
            engine_startup_timeout_s: 120.0,
            api_key: None,
            admin_key: None,
            tensor_parallel_size: 1,
            pipeline_parallel_size: 1,
            expert_parallel_size: 1,
            data_parallel_size: 1,
            async_engine: true,
            enable_prefix_caching: true,
            max_num_batched_tokens: 8192,
            max_num_seqs: 1024,
            gpu_memory_utilization: 0.8,
            enforce_eager: true,
            remote_urls: Vec::new(),
            enable_http_endpoint: false,
            http_endpoint_host: "127.0.0.1".into(),
            http_endpoint_port: 8000,
            served_model_name: None,
            engine_init_kwargs: BTreeMap::new(),
        }
    }
}
