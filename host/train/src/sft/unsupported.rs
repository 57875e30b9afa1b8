//! The keys of skyrl 0.3.0's `SFTConfig` this trainer cannot honour (Megatron,
//! FSDP knobs, profilers, ...). Each is accepted when it holds 0.3.0's
//! default, so a config written for 0.3.0 loads, and refused with an error
//! naming it otherwise. They are taken out of the tree before it is turned
//! into an [`super::SftConfig`], which therefore has no field for them; a key
//! under these sections that 0.3.0 does not have is refused as unknown.

use serde_norway::{Mapping, Value};

use crate::config::{ConfigError, ConfigTree};

const MEGATRON: &str = "strategy megatron is not supported (use fsdp or ddp)";
const FSDP: &str = "the fsdp strategy here shards optimizer state and gradients over the ranks \
                    and has no FSDP options";
const QAT: &str = "fake-INT4 QAT is not supported (Megatron only in skyrl 0.3.0)";
const PROFILER: &str = "torch.profiler is not available";
const LOADER: &str = "batches are collated in the training process (no loader workers)";
const SAMPLER: &str = "custom Python samplers are not supported (sampler: random or sequential)";
const PACKING: &str = "FFD sequence packing is Megatron-only in skyrl 0.3.0";
const DUMMY: &str = "the dummy benchmarking run is not supported";

/// `(dotted key, 0.3.0's default as YAML, why it is not honoured)`.
const KEYS: &[(&str, &str, &str)] = &[
    // SFTConfig's own Megatron default: TP 2, PP 2.
    ("megatron_config.tensor_model_parallel_size", "2", MEGATRON),
    (
        "megatron_config.pipeline_model_parallel_size",
        "2",
        MEGATRON,
    ),
    ("megatron_config.context_parallel_size", "1", MEGATRON),
    ("megatron_config.expert_model_parallel_size", "1", MEGATRON),
    (
        "megatron_config.expert_tensor_parallel_size",
        "null",
        MEGATRON,
    ),
    (
        "megatron_config.moe_token_dispatcher_type",
        "alltoall",
        MEGATRON,
    ),
    (
        "megatron_config.moe_router_load_balancing_type",
        "none",
        MEGATRON,
    ),
    ("megatron_config.moe_aux_loss_coeff", "0.0", MEGATRON),
    ("megatron_config.moe_grouped_gemm", "true", MEGATRON),
    (
        "megatron_config.moe_router_score_function",
        "null",
        MEGATRON,
    ),
    (
        "megatron_config.moe_router_enable_expert_bias",
        "null",
        MEGATRON,
    ),
    (
        "megatron_config.moe_enable_routing_replay",
        "false",
        MEGATRON,
    ),
    ("megatron_config.moe_per_layer_logging", "false", MEGATRON),
    ("megatron_config.moe_router_dtype", "fp32", MEGATRON),
    (
        "megatron_config.ddp_config.grad_reduce_in_fp32",
        "true",
        MEGATRON,
    ),
    (
        "megatron_config.ddp_config.overlap_grad_reduce",
        "false",
        MEGATRON,
    ),
    (
        "megatron_config.ddp_config.overlap_param_gather",
        "false",
        MEGATRON,
    ),
    (
        "megatron_config.ddp_config.average_in_collective",
        "true",
        MEGATRON,
    ),
    (
        "megatron_config.hf_export_config.distributed_save",
        "false",
        MEGATRON,
    ),
    (
        "megatron_config.hf_export_config.save_every_n_ranks",
        "1",
        MEGATRON,
    ),
    ("megatron_config.lora_config.lora_type", "lora", MEGATRON),
    ("megatron_config.lora_config.merge_lora", "true", MEGATRON),
    (
        "megatron_config.optimizer_config_kwargs",
        "{overlap_cpu_optimizer_d2h_h2d: false, use_precision_aware_optimizer: false, \
         optimizer_cpu_offload: false, optimizer_offload_fraction: 0.0}",
        MEGATRON,
    ),
    (
        "megatron_config.transformer_config_kwargs",
        "{recompute_granularity: full, recompute_modules: [core_attn], recompute_method: uniform, \
         recompute_num_layers: 1, gradient_accumulation_fusion: false}",
        MEGATRON,
    ),
    ("megatron_config.empty_cuda_cache", "true", MEGATRON),
    ("megatron_config.model_config_kwargs", "{}", MEGATRON),
    (
        "megatron_config.dist_ckpt_optim_fully_reshardable",
        "false",
        MEGATRON,
    ),
    ("megatron_config.freeze_moe_router", "false", MEGATRON),
    ("megatron_config.mtp_num_layers", "null", MEGATRON),
    ("megatron_config.mtp_loss_weight", "0.1", MEGATRON),
    ("megatron_config.mtp_loss_chunk_size", "1024", MEGATRON),
    ("megatron_config.mtp_loss_topk", "null", MEGATRON),
    ("fsdp_config.cpu_offload", "false", FSDP),
    ("fsdp_config.reshard_after_forward", "true", FSDP),
    ("fsdp_config.fsdp_size", "-1", FSDP),
    ("fsdp_config.mixed_precision", "null", FSDP),
    ("fsdp_config.wrap_policy", "{}", FSDP),
    ("model.fake_int4_qat.enabled", "false", QAT),
    ("model.fake_int4_qat.group_size", "32", QAT),
    ("model.fake_int4_qat.symmetric", "true", QAT),
    ("model.fake_int4_qat.scale_divisor", "7.5", QAT),
    ("model.fake_int4_qat.q_min", "-8.0", QAT),
    ("model.fake_int4_qat.bf16_base_path", "null", QAT),
    ("torch_profiler_config.enable", "false", PROFILER),
    ("torch_profiler_config.ranks", "[0]", PROFILER),
    ("torch_profiler_config.save_path", "null", PROFILER),
    ("torch_profiler_config.skip_first", "10", PROFILER),
    ("torch_profiler_config.wait", "0", PROFILER),
    ("torch_profiler_config.warmup", "1", PROFILER),
    ("torch_profiler_config.active", "1", PROFILER),
    ("torch_profiler_config.repeat", "1", PROFILER),
    ("torch_profiler_config.activities", "[cpu, cuda]", PROFILER),
    ("torch_profiler_config.record_shapes", "true", PROFILER),
    ("torch_profiler_config.profile_memory", "false", PROFILER),
    ("torch_profiler_config.with_stack", "true", PROFILER),
    ("torch_profiler_config.with_flops", "false", PROFILER),
    ("torch_profiler_config.with_modules", "false", PROFILER),
    (
        "torch_profiler_config.export_type",
        "chrome_trace",
        PROFILER,
    ),
    (
        "sequence_parallel_size",
        "1",
        "sequence parallelism is not supported",
    ),
    (
        "model_config_kwargs",
        "{}",
        "Hugging Face model config overrides are not supported",
    ),
    (
        "use_torch_compile",
        "false",
        "torch.compile is not available",
    ),
    (
        "record_memory",
        "false",
        "CUDA memory snapshots are not supported",
    ),
    (
        "tags",
        "null",
        "run tags are not passed to the trackers yet",
    ),
    ("dataloader_num_workers", "0", LOADER),
    ("dataloader_persistent_workers", "false", LOADER),
    ("sampler_class_path", "null", SAMPLER),
    ("sampler_kwargs", "{}", SAMPLER),
    ("use_sequence_packing", "false", PACKING),
    ("max_tokens_per_microbatch", "null", PACKING),
    ("dummy_run_full_ctx", "false", DUMMY),
    ("dummy_run_max_steps", "5", DUMMY),
];

/// The top-level places these keys live (sections or single keys).
const ROOTS: &[&str] = &[
    "megatron_config",
    "fsdp_config",
    "torch_profiler_config",
    "model.fake_int4_qat",
    "sequence_parallel_size",
    "model_config_kwargs",
    "use_torch_compile",
    "record_memory",
    "tags",
    "dataloader_num_workers",
    "dataloader_persistent_workers",
    "sampler_class_path",
    "sampler_kwargs",
    "use_sequence_packing",
    "max_tokens_per_microbatch",
    "dummy_run_full_ctx",
    "dummy_run_max_steps",
];

/// Takes every unsupported key out of `tree`; those not at 0.3.0's default
/// (and unknown keys under their sections) are errors, each naming its key
/// and where it was set.
pub fn take_unsupported(tree: &mut ConfigTree) -> Result<(), ConfigError> {
    let mut found: Vec<(String, Value)> = Vec::new();
    for root in ROOTS {
        if let Some(v) = take_path(&mut tree.root, root) {
            found.push((root.to_string(), v));
            // A section left empty (`model` after `model.lora`) keeps its defaults.
            if let Some((parent, _)) = root.rsplit_once('.') {
                if get_path(&tree.root, parent)
                    .and_then(Value::as_mapping)
                    .is_some_and(Mapping::is_empty)
                {
                    take_path(&mut tree.root, parent);
                }
            }
        }
    }
    let mut errors = Vec::new();
    for (path, value) in found {
        check(&path, &value, &mut |key, message| {
            errors.push(format!(
                "config key `{key}`{}: {message}",
                tree.origin_of(key)
            ));
        });
    }
    match errors.is_empty() {
        true => Ok(()),
        false => Err(ConfigError::Invalid(errors)),
    }
}

/// Checks `value` set at `path` against the table, reporting each problem.
fn check(path: &str, value: &Value, report: &mut dyn FnMut(&str, String)) {
    if let Some((_, default, why)) = KEYS.iter().find(|(k, _, _)| *k == path) {
        let default: Value = serde_norway::from_str(default).expect("table defaults are YAML");
        if !is_default(value, &default) {
            let shown = serde_norway::to_string(&default).unwrap_or_default();
            report(
                path,
                format!(
                    "not supported: {why}; only skyrl 0.3.0's default ({}) is accepted",
                    shown.trim()
                ),
            );
        }
        return;
    }
    let prefix = format!("{path}.");
    if !KEYS.iter().any(|(k, _, _)| k.starts_with(&prefix)) {
        report(
            path,
            "unknown key (not a key of skyrl 0.3.0's SFTConfig)".into(),
        );
        return;
    }
    match value {
        Value::Null => {}
        Value::Mapping(m) => {
            for (k, v) in m {
                let name = k
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{k:?}"));
                check(&format!("{path}.{name}"), v, report);
            }
        }
        _ => report(path, "must be a mapping".into()),
    }
}

/// Whether `value` equals `default`: numbers by value, and a mapping when every
/// key it sets holds the default's value (0.3.0 fills the rest in).
fn is_default(value: &Value, default: &Value) -> bool {
    match (value, default) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Mapping(a), Value::Mapping(b)) => a
            .iter()
            .all(|(k, v)| b.get(k).is_some_and(|d| is_default(v, d))),
        (Value::Sequence(a), Value::Sequence(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| is_default(x, y))
        }
        (a, b) => a == b,
    }
}

/// Removes the value at dotted `path` from `root`, if it is there.
pub fn take_path(root: &mut Value, path: &str) -> Option<Value> {
    let parts: Vec<&str> = path.split('.').collect();
    let (last, parents) = parts.split_last()?;
    let mut node = root;
    for p in parents {
        node = node.as_mapping_mut()?.get_mut(*p)?;
    }
    node.as_mapping_mut()?.remove(*last)
}

/// The value at dotted `path` in `root`, if any.
pub fn get_path<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(root, |node, p| node.as_mapping()?.get(p))
}

/// Sets `value` at dotted `path`, creating mappings on the way.
pub fn set_path(root: &mut Value, path: &str, value: Value) {
    let parts: Vec<&str> = path.split('.').collect();
    let (last, parents) = parts.split_last().expect("a non-empty path");
    let mut node = root;
    for p in parents {
        if !node.is_mapping() {
            *node = Value::Mapping(Mapping::new());
        }
        node = node
            .as_mapping_mut()
            .expect("a mapping")
            .entry(Value::String(p.to_string()))
            .or_insert(Value::Null);
    }
    if !node.is_mapping() {
        *node = Value::Mapping(Mapping::new());
    }
    node.as_mapping_mut()
        .expect("a mapping")
        .insert(Value::String(last.to_string()), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(s: &str) -> Value {
        serde_norway::from_str(s).unwrap()
    }

    #[test]
    fn defaults_compare_by_value_and_mappings_by_the_keys_they_set() {
        assert!(is_default(&yaml("1"), &yaml("1.0")));
        assert!(!is_default(&yaml("2"), &yaml("1")));
        let d = yaml("{a: 1, b: [x]}");
        assert!(is_default(&yaml("{a: 1}"), &d));
        assert!(is_default(&yaml("{}"), &d));
        assert!(!is_default(&yaml("{a: 2}"), &d));
        assert!(!is_default(&yaml("{c: 1}"), &d));
        assert!(!is_default(&yaml("{b: [y]}"), &d));
    }

    #[test]
    fn every_table_key_lives_under_a_root_and_parses() {
        for (k, d, _) in KEYS {
            assert!(
                ROOTS
                    .iter()
                    .any(|r| k == r || k.starts_with(&format!("{r}."))),
                "{k} has no root"
            );
            serde_norway::from_str::<Value>(d).unwrap_or_else(|e| panic!("{k}: {e}"));
        }
    }
}
