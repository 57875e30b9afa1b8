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

/// The resolved plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InferencePlan {
    pub placement: Placement,
    pub weight_sync: WeightSyncBackend,
}

/// Checks `trainer.placement.colocate_all` (`colocate`) against
/// `generator.inference_engine.*` (`ie`) and resolves the plan.
pub fn plan(colocate: bool, ie: &InferenceEngineConfig) -> Result<InferencePlan> {
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
    Ok(InferencePlan {
        placement,
        weight_sync: backend,
    })
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
        plan(c.colocate_all.unwrap_or(true), &c.ie)
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
}
