//! The built-in engine's sizing from `generator.inference_engine.*`:
//! `max_num_seqs`, `max_num_batched_tokens`, `enable_prefix_caching`, and the
//! KV pool budget: `engine_init_kwargs.kv_cache_memory_bytes` when given (vLLM's
//! name), else on a GPU `gpu_memory_utilization` of the device's memory minus
//! the engine's weights, else (CPU) enough for `max_num_seqs` full-context
//! sequences capped at 4 GiB. `engine_init_kwargs.block_size` sets the block
//! size; any other `engine_init_kwargs` key is refused by name for this backend.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use skyrl_model::{CausalLm, EngineSettings};

use crate::config::InferenceEngineConfig;

/// `engine_init_kwargs` keys the built-in engine reads.
pub const BUILTIN_ENGINE_KWARGS: [&str; 2] = ["kv_cache_memory_bytes", "block_size"];

/// Settings for a built-in engine serving `model`; fails on keys it cannot
/// honour and on a budget that cannot hold one full-context sequence.
pub fn builtin_engine_settings(
    ie: &InferenceEngineConfig,
    model: &CausalLm,
) -> Result<EngineSettings> {
    let key = |k: &str| format!("generator.inference_engine.engine_init_kwargs.{k}");
    for k in ie.engine_init_kwargs.keys() {
        if !BUILTIN_ENGINE_KWARGS.contains(&k.as_str()) {
            bail!(
                "{} is not read by the built-in engine (backend `{}`); it reads {BUILTIN_ENGINE_KWARGS:?}",
                key(k),
                ie.backend
            );
        }
    }
    let count = |k: &str| -> Result<Option<u64>> {
        match ie.engine_init_kwargs.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .with_context(|| format!("{} must be a positive integer, got {v}", key(k))),
        }
    };
    if !(ie.gpu_memory_utilization > 0.0 && ie.gpu_memory_utilization <= 1.0) {
        bail!(
            "generator.inference_engine.gpu_memory_utilization must be in (0, 1], got {}",
            ie.gpu_memory_utilization
        );
    }
    let kv_cache_bytes = match count("kv_cache_memory_bytes")? {
        Some(bytes) => Some(bytes),
        None => gpu_kv_budget(model, ie.gpu_memory_utilization)?,
    };
    let settings = EngineSettings {
        max_num_seqs: ie.max_num_seqs,
        max_num_batched_tokens: ie.max_num_batched_tokens,
        block_size: count("block_size")?.unwrap_or(16) as usize,
        kv_cache_bytes,
        enable_prefix_caching: ie.enable_prefix_caching,
    };
    settings
        .validate(model)
        .context("generator.inference_engine: the built-in engine cannot start")?;
    Ok(settings)
}

/// On a GPU, the KV pool's bytes: half of what `utilization` of the device's
/// memory leaves after `model`'s weights (vLLM's `gpu_memory_utilization`);
/// the other half is for the decode rows' contiguous copy of the running
/// sequences' KV and for activations. `None` on the CPU.
pub fn gpu_kv_budget(model: &CausalLm, utilization: f64) -> Result<Option<u64>> {
    let tch::Device::Cuda(index) = model.device() else {
        return Ok(None);
    };
    if !(utilization > 0.0 && utilization <= 1.0) {
        bail!("gpu_memory_utilization must be in (0, 1], got {utilization}");
    }
    let total = cuda_total_bytes(index)?;
    let weights = model.num_parameters() as u64 * model.kind().elt_size_in_bytes() as u64;
    Ok(Some(
        ((total as f64 * utilization) as u64).saturating_sub(weights) / 2,
    ))
}

/// Memory of CUDA device `index` in bytes, as `nvidia-smi` reports it.
fn cuda_total_bytes(index: usize) -> Result<u64> {
    let out = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=memory.total",
            "--format=csv,noheader,nounits",
            "-i",
            &index.to_string(),
        ])
        .output()
        .context(
            "cannot run nvidia-smi to size the KV cache from gpu_memory_utilization; \
             set generator.inference_engine.engine_init_kwargs.kv_cache_memory_bytes",
        )?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mib: u64 = text.trim().parse().with_context(|| {
        format!(
            "nvidia-smi reported `{}` as the memory of GPU {index}",
            text.trim()
        )
    })?;
    Ok(mib << 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skyrl_model::{init_tiny_model, Arch, LoadOptions, TinySize};

    #[test]
    fn keys_are_honoured_or_refused_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        init_tiny_model(Arch::Qwen2, TinySize::Tiny, tmp.path(), 1).unwrap();
        let options = LoadOptions {
            device: tch::Device::Cpu,
            kind: tch::Kind::Float,
        };
        let model = CausalLm::from_pretrained(tmp.path(), &options).unwrap();
        let mut ie = InferenceEngineConfig {
            max_num_seqs: 7,
            max_num_batched_tokens: 300,
            enable_prefix_caching: false,
            ..Default::default()
        };
        ie.engine_init_kwargs
            .insert("block_size".into(), Value::from(8));
        let s = builtin_engine_settings(&ie, &model).unwrap();
        assert_eq!(
            (
                s.max_num_seqs,
                s.max_num_batched_tokens,
                s.block_size,
                s.enable_prefix_caching
            ),
            (7, 300, 8, false)
        );
        ie.engine_init_kwargs
            .insert("kv_cache_memory_bytes".into(), Value::from(1024));
        let err = format!("{:#}", builtin_engine_settings(&ie, &model).unwrap_err());
        assert!(err.contains("cannot hold one sequence"), "{err}");
        ie.engine_init_kwargs.clear();
        ie.engine_init_kwargs
            .insert("swap_space".into(), Value::from(4));
        let err = builtin_engine_settings(&ie, &model)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("generator.inference_engine.engine_init_kwargs.swap_space"),
            "{err}"
        );
    }
}
