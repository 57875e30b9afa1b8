//! skyrl-train 0.3.1's flat inference-engine keys (`generator.backend`,
//! `generator.num_inference_engines`, ...), moved to where skyrl 0.3.0 and this
//! project keep them (`generator.inference_engine.*`) with a warning, so a
//! config written for either release loads. A key set both ways is an error.

use serde_norway::{Mapping, Value};

use super::load::ConfigError;

/// `(skyrl-train 0.3.1 key under generator, key under generator.inference_engine)`.
pub const LEGACY_ENGINE_KEYS: [(&str, &str); 21] = [
    ("model_dtype", "model_dtype"),
    ("run_engines_locally", "run_engines_locally"),
    ("num_inference_engines", "num_engines"),
    ("backend", "backend"),
    ("weight_sync_backend", "weight_sync_backend"),
    (
        "weight_transfer_threshold_cuda_ipc_GB",
        "weight_transfer_threshold_cuda_ipc_GB",
    ),
    (
        "inference_engine_tensor_parallel_size",
        "tensor_parallel_size",
    ),
    (
        "inference_engine_pipeline_parallel_size",
        "pipeline_parallel_size",
    ),
    (
        "inference_engine_expert_parallel_size",
        "expert_parallel_size",
    ),
    ("inference_engine_data_parallel_size", "data_parallel_size"),
    ("async_engine", "async_engine"),
    ("vllm_v1_disable_multiproc", "vllm_v1_disable_multiproc"),
    ("enable_prefix_caching", "enable_prefix_caching"),
    ("enable_chunked_prefill", "enable_chunked_prefill"),
    ("max_num_batched_tokens", "max_num_batched_tokens"),
    ("enforce_eager", "enforce_eager"),
    ("gpu_memory_utilization", "gpu_memory_utilization"),
    ("max_num_seqs", "max_num_seqs"),
    ("remote_inference_engine_urls", "remote_urls"),
    ("enable_http_endpoint", "enable_http_endpoint"),
    ("engine_init_kwargs", "engine_init_kwargs"),
];

/// More 0.3.1 keys that keep their name under `inference_engine`.
const SAME_NAME: [&str; 4] = [
    "http_endpoint_host",
    "http_endpoint_port",
    "fully_sharded_loras",
    "override_existing_update_group",
];

/// Moves every legacy key of `root.generator` into `generator.inference_engine`.
pub fn migrate(root: &mut Value) -> Result<(), ConfigError> {
    let Some(Value::Mapping(generator)) = root.get_mut("generator") else {
        return Ok(());
    };
    let pairs = LEGACY_ENGINE_KEYS
        .iter()
        .copied()
        .chain(SAME_NAME.iter().map(|k| (*k, *k)));
    let mut moved = Vec::new();
    for (old, new) in pairs {
        let Some(value) = generator.remove(old) else {
            continue;
        };
        let engine = generator
            .entry(Value::String("inference_engine".into()))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        let Value::Mapping(engine) = engine else {
            return Err(ConfigError::Invalid(vec![
                "generator.inference_engine must be a mapping".into(),
            ]));
        };
        if engine.contains_key(new) {
            return Err(ConfigError::Invalid(vec![format!(
                "generator.{old} (skyrl-train 0.3.1) and generator.inference_engine.{new} are both set; keep the second"
            )]));
        }
        engine.insert(Value::String(new.into()), value);
        moved.push(format!(
            "generator.{old} -> generator.inference_engine.{new}"
        ));
    }
    if !moved.is_empty() {
        tracing::warn!(
            "skyrl-train 0.3.1 config keys moved to skyrl 0.3.0's layout: {}",
            moved.join(", ")
        );
    }
    Ok(())
}
