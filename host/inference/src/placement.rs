//! Placement and weight-sync plan from `trainer.placement.*` and
//! `generator.inference_engine.*`, with clear errors for combinations that
//! cannot work.

use anyhow::{bail, Result};

use crate::config::InferenceEngineConfig;

/// Where the inference engines run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// `colocate_all`: one engine in the trainer process, on its device.
    Colocated,
    /// `colocate_all=false`, `run_engines_locally`: the trainer starts
    /// `num_engines` `skyrl serve` processes on loopback.
    LocalServers { num_engines: usize },
    /// `run_engines_locally=false`: servers someone else runs (`remote_urls`).
    External { urls: Vec<String> },
}

/// How trained weights reach the engines (`weight_sync_backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightSyncBackend {
    /// In-process copy into the colocated engine.
    Colocated,
    /// Safetensors to `weight_sync_path`, then `/update_weights_from_disk`.
    Checkpoint,
    /// NCCL broadcast from the trainer (rank 0) to every engine.
    Nccl,
}

/// What serves rollouts (`generator.inference_engine.backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// The libtorch engine: in this process, or `skyrl serve` processes;
    /// external servers are driven with SGLang-style control endpoints.
    Tch,
    /// `vllm serve` processes, or external vLLM servers driven with vLLM's
    /// (SkyRL's) control endpoints.
    Vllm,
}

impl EngineKind {
    /// The kind named by `backend`.
    pub fn parse(backend: &str) -> Result<Self> {
        match backend {
            "tch" => Ok(EngineKind::Tch),
            "vllm" => Ok(EngineKind::Vllm),
            "sglang" => bail!(
                "generator.inference_engine.backend=sglang is not supported; use vllm or tch \
                 (SGLang servers can be used as remote_urls with backend=tch, whose control \
                 endpoints follow SGLang's names)"
            ),
            other => bail!("generator.inference_engine.backend=`{other}` is unknown (tch or vllm)"),
        }
    }
}

/// The resolved plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InferencePlan {
    pub placement: Placement,
    pub weight_sync: WeightSyncBackend,
    pub engine: EngineKind,
}

/// Checks `trainer.placement.colocate_all` (`colocate`) against
/// `generator.inference_engine.*` (`ie`) and resolves the plan; with
/// `backend: vllm` and servers to start, vLLM must be installed.
pub fn plan(colocate: bool, ie: &InferenceEngineConfig) -> Result<InferencePlan> {
    plan_with(colocate, ie, &|| crate::vllm::find_vllm().map(drop))
}

/// [`plan`] with the check that vLLM is installed given (tests).
pub fn plan_with(
    colocate: bool,
    ie: &InferenceEngineConfig,
    vllm_installed: &dyn Fn() -> Result<()>,
) -> Result<InferencePlan> {
    let engine = EngineKind::parse(&ie.backend)?;
    let backend = match ie.weight_sync_backend.as_str() {
        "colocated" => WeightSyncBackend::Colocated,
        "checkpoint" => WeightSyncBackend::Checkpoint,
        "nccl" => WeightSyncBackend::Nccl,
        "cuda_ipc" => bail!(
            "generator.inference_engine.weight_sync_backend=cuda_ipc is not supported; \
             use colocated (in-process engine), checkpoint or nccl"
        ),
        other => bail!(
            "generator.inference_engine.weight_sync_backend=`{other}` is unknown \
             (colocated, checkpoint or nccl)"
        ),
    };
    let placement = if !ie.run_engines_locally {
        if colocate {
            bail!(
                "trainer.placement.colocate_all=true needs engines in this process; \
                 with generator.inference_engine.run_engines_locally=false set colocate_all=false"
            );
        }
        if ie.remote_urls.is_empty() {
            bail!(
                "generator.inference_engine.run_engines_locally=false needs \
                 generator.inference_engine.remote_urls (e.g. [\"http://127.0.0.1:8000\"])"
            );
        }
        Placement::External {
            urls: ie.remote_urls.clone(),
        }
    } else {
        if !ie.remote_urls.is_empty() {
            bail!(
                "generator.inference_engine.remote_urls is only used with \
                 run_engines_locally=false"
            );
        }
        if colocate {
            if ie.num_engines != 1 {
                bail!(
                    "trainer.placement.colocate_all=true runs one in-process engine; \
                     set generator.inference_engine.num_engines=1 or colocate_all=false"
                );
            }
            Placement::Colocated
        } else {
            if ie.num_engines == 0 {
                bail!("generator.inference_engine.num_engines must be at least 1");
            }
            Placement::LocalServers {
                num_engines: ie.num_engines,
            }
        }
    };
    match (&placement, backend) {
        (Placement::Colocated, WeightSyncBackend::Colocated) => {}
        (Placement::Colocated, _) => bail!(
            "weight_sync_backend={} needs separate engines; the colocated engine shares the \
             trainer's memory (use weight_sync_backend=colocated, or trainer.placement.colocate_all=false)",
            ie.weight_sync_backend,
        ),
        (_, WeightSyncBackend::Colocated) => bail!(
            "weight_sync_backend=colocated needs trainer.placement.colocate_all=true; \
             separate engines use checkpoint or nccl"
        ),
        _ => {}
    }
    check_engine_keys(engine, &placement, ie)?;
    if engine == EngineKind::Vllm && matches!(placement, Placement::LocalServers { .. }) {
        vllm_installed()?;
    }
    Ok(InferencePlan {
        placement,
        weight_sync: backend,
        engine,
    })
}

/// Refuses keys the engine kind or placement cannot honour, by name.
fn check_engine_keys(
    engine: EngineKind,
    placement: &Placement,
    ie: &InferenceEngineConfig,
) -> Result<()> {
    const K: &str = "generator.inference_engine";
    if ie.tensor_parallel_size == 0 {
        bail!("{K}.tensor_parallel_size must be at least 1");
    }
    if !(ie.gpu_memory_utilization > 0.0 && ie.gpu_memory_utilization <= 1.0) {
        bail!(
            "{K}.gpu_memory_utilization must be in (0, 1], got {}",
            ie.gpu_memory_utilization
        );
    }
    let external = matches!(placement, Placement::External { .. });
    match engine {
        EngineKind::Vllm if matches!(placement, Placement::Colocated) => bail!(
            "{K}.backend=vllm runs vLLM servers; set trainer.placement.colocate_all=false \
             (the trainer then starts num_engines `vllm serve` processes, or uses remote_urls \
             with run_engines_locally=false)"
        ),
        EngineKind::Tch if ie.tensor_parallel_size != 1 => bail!(
            "{K}.tensor_parallel_size={} needs backend=vllm: the tch engine runs on one device",
            ie.tensor_parallel_size
        ),
        EngineKind::Tch => {
            let builtin = crate::engine_settings::BUILTIN_ENGINE_KWARGS;
            if let Some(k) = ie
                .engine_init_kwargs
                .keys()
                .find(|k| !builtin.contains(&k.as_str()))
            {
                bail!(
                    "{K}.engine_init_kwargs.{k} is not read by the built-in engine (backend tch); \
                     it reads {builtin:?} (other `vllm serve` arguments need backend=vllm)"
                );
            }
        }
        _ => {}
    }
    if external && ie.tensor_parallel_size != 1 {
        bail!(
            "{K}.tensor_parallel_size applies to servers the trainer starts; servers in \
             remote_urls are sized by whoever runs them (remove the key)"
        );
    }
    if external && !ie.engine_init_kwargs.is_empty() {
        bail!(
            "{K}.engine_init_kwargs apply to servers the trainer starts; servers in remote_urls \
             are configured by whoever runs them (remove the key)"
        );
    }
    if engine == EngineKind::Vllm {
        crate::vllm::check_kwargs(&ie.engine_init_kwargs)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two config sections a plan reads, at their paths in the tree.
    #[derive(Default)]
    struct Cfg {
        colocate_all: Option<bool>,
        ie: InferenceEngineConfig,
    }

    fn cfg(f: impl FnOnce(&mut Cfg)) -> Cfg {
        let mut c = Cfg::default();
        f(&mut c);
        c
    }

    fn plan_of(c: &Cfg) -> Result<InferencePlan> {
        plan_with(c.colocate_all.unwrap_or(true), &c.ie, &|| Ok(()))
    }

    #[test]
    fn defaults_are_colocated() {
        let p = plan_of(&Cfg::default()).unwrap();
        assert_eq!(p.placement, Placement::Colocated);
        assert_eq!(p.weight_sync, WeightSyncBackend::Colocated);
    }

    #[test]
    fn disaggregated_and_external_plans() {
        let p = plan_of(&cfg(|c| {
            c.colocate_all = Some(false);
            c.ie.num_engines = 2;
            c.ie.weight_sync_backend = "checkpoint".into();
        }))
        .unwrap();
        assert_eq!(p.placement, Placement::LocalServers { num_engines: 2 });
        let p = plan_of(&cfg(|c| {
            c.colocate_all = Some(false);
            c.ie.run_engines_locally = false;
            c.ie.remote_urls = vec!["http://h:1".into()];
            c.ie.weight_sync_backend = "nccl".into();
        }))
        .unwrap();
        assert_eq!(p.weight_sync, WeightSyncBackend::Nccl);
    }

    #[test]
    fn impossible_combinations_are_explained() {
        let err = |f: fn(&mut Cfg)| plan_of(&cfg(f)).unwrap_err().to_string();
        assert!(err(|c| c.ie.run_engines_locally = false)
            .contains("colocate_all=true needs engines in this process"));
        assert!(err(|c| {
            c.colocate_all = Some(false);
            c.ie.run_engines_locally = false;
        })
        .contains("remote_urls"));
        assert!(err(|c| c.ie.weight_sync_backend = "checkpoint".into())
            .contains("needs separate engines"));
        assert!(
            err(|c| c.colocate_all = Some(false)).contains("weight_sync_backend=colocated needs")
        );
        assert!(err(|c| c.ie.weight_sync_backend = "cuda_ipc".into()).contains("not supported"));
        assert!(err(|c| c.ie.weight_sync_backend = "gloo".into()).contains("unknown"));
    }

    #[test]
    fn vllm_backend_plans_and_refusals() {
        let p = plan_of(&cfg(|c| {
            c.colocate_all = Some(false);
            c.ie.backend = "vllm".into();
            c.ie.num_engines = 2;
            c.ie.tensor_parallel_size = 2;
            c.ie.weight_sync_backend = "nccl".into();
            c.ie.engine_init_kwargs
                .insert("max_model_len".into(), 4096.into());
        }))
        .unwrap();
        assert_eq!(p.engine, EngineKind::Vllm);
        assert_eq!(p.placement, Placement::LocalServers { num_engines: 2 });
        let err = |f: fn(&mut Cfg)| plan_of(&cfg(f)).unwrap_err().to_string();
        assert!(err(|c| c.ie.backend = "vllm".into()).contains("colocate_all=false"));
        assert!(err(|c| c.ie.backend = "trt".into()).contains("backend=`trt` is unknown"));
        assert!(err(|c| c.ie.tensor_parallel_size = 2)
            .contains("tensor_parallel_size=2 needs backend=vllm"));
        assert!(err(|c| {
            c.ie.engine_init_kwargs.insert("seed".into(), 1.into());
        })
        .contains("engine_init_kwargs.seed is not read by the built-in engine"));
        assert!(err(|c| {
            c.colocate_all = Some(false);
            c.ie.weight_sync_backend = "checkpoint".into();
            c.ie.backend = "vllm".into();
            c.ie.engine_init_kwargs.insert("port".into(), 1.into());
        })
        .contains("engine_init_kwargs.port is set by the launcher"));
        assert!(err(|c| {
            c.colocate_all = Some(false);
            c.ie.run_engines_locally = false;
            c.ie.remote_urls = vec!["http://h:1".into()];
            c.ie.weight_sync_backend = "nccl".into();
            c.ie.backend = "vllm".into();
            c.ie.tensor_parallel_size = 4;
        })
        .contains("servers in remote_urls are sized by whoever runs them"));
        assert!(err(|c| c.ie.gpu_memory_utilization = 1.5).contains("gpu_memory_utilization"));
    }

    #[test]
    fn starting_vllm_needs_it_installed() {
        let c = cfg(|c| {
            c.colocate_all = Some(false);
            c.ie.backend = "vllm".into();
            c.ie.weight_sync_backend = "checkpoint".into();
        });
        let missing = || {
            crate::vllm::find_vllm_with(
                std::path::Path::new("/nonexistent/python"),
                Some("/nonexistent".as_ref()),
            )
            .map(drop)
        };
        let e = plan_with(false, &c.ie, &missing).unwrap_err().to_string();
        assert!(e.contains("generator.inference_engine.backend=vllm"), "{e}");
        assert!(e.contains("not installed"), "{e}");
        // External vLLM servers need nothing installed here.
        let mut ext = c.ie.clone();
        ext.run_engines_locally = false;
        ext.remote_urls = vec!["http://h:1".into()];
        assert_eq!(
            plan_with(false, &ext, &missing).unwrap().engine,
            EngineKind::Vllm
        );
    }
}
