//! The one thread that runs the models: jobs arrive in the order the routes
//! accepted them (so a model's calls apply in the order its client sent
//! them), each ends its future in the store, and waiters are woken. A job
//! that fails (bad data, a panic in the model) fails its future with the
//! error; the thread keeps serving.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

use prost::Message;
use serde_json::json;
use skyrl_model::{LoadOptions, SamplingParams};
use tokio::sync::watch;

use crate::loss::LossFn;
use crate::proto::{self, ArrayRecord, ForwardBackwardOutput};
use crate::sampler::{SampleError, Samplers};
use crate::store::{FutureState, Store};
use crate::training::{AdamStep, DatumInput, TrainingModel};

/// Content type of protobuf results.
pub const PROTOBUF: &str = "application/x-protobuf";
/// Content type of JSON results.
pub const JSON: &str = "application/json";

/// Work for the model thread.
pub enum Op {
    CreateModel {
        model_id: String,
        rank: i64,
        seed: u64,
    },
    ForwardBackward {
        model_id: String,
        data: Vec<DatumInput>,
        loss: LossFn,
        backward: bool,
    },
    OptimStep {
        model_id: String,
        adam: AdamStep,
    },
    SaveForSampler {
        model_id: String,
        checkpoint_id: String,
        sampling_session_id: Option<String>,
    },
    /// A training checkpoint (`save_state`).
    SaveWeights {
        model_id: String,
        checkpoint_id: String,
    },
    /// Loads a training checkpoint into `model_id`; with `create`, the model
    /// is made first, with the checkpoint's `(rank, seed)`.
    LoadWeights {
        model_id: String,
        source: PathBuf,
        optimizer: bool,
        create: Option<(i64, u64)>,
    },
    /// Drops models from memory (their session finished).
    Unload {
        model_ids: Vec<String>,
    },
    Sample {
        /// The model directory to sample from (base or saved weights).
        dir: PathBuf,
        prompt: Vec<i64>,
        num_samples: usize,
        params: SamplingParams,
        prompt_logprobs: bool,
    },
}

/// A job: its future's id and what to do.
pub struct Job {
    pub request_id: i64,
    pub op: Op,
}

/// Where the model thread reads and writes.
#[derive(Clone)]
pub struct WorkerConfig {
    /// The base model's directory and the name clients use for it.
    pub base_dir: PathBuf,
    pub base_name: String,
    /// Checkpoints live under `data_dir/checkpoints/<model_id>/`.
    pub data_dir: PathBuf,
    pub options: LoadOptions,
}

impl WorkerConfig {
    /// Directory of checkpoint `name` of `kind` (`training` or `sampler`)
    /// of `model_id`: `DATA_DIR/checkpoints/MODEL/SEGMENT/NAME`.
    pub fn checkpoint_dir(&self, model_id: &str, kind: &str, name: &str) -> PathBuf {
        self.data_dir
            .join("checkpoints")
            .join(model_id)
            .join(path_segment(kind))
            .join(name)
    }
}

/// A training checkpoint (`save_state`) and sampler weights, as the store
/// names their kinds.
pub const TRAINING: &str = "training";
pub const SAMPLER: &str = "sampler";

/// The path segment of a checkpoint kind: `weights` (training) or `sampler_weights`.
pub fn path_segment(kind: &str) -> &'static str {
    if kind == TRAINING {
        "weights"
    } else {
        "sampler_weights"
    }
}

/// The `tinker://MODEL/SEGMENT/NAME` path of a checkpoint.
pub fn tinker_path(model_id: &str, kind: &str, name: &str) -> String {
    format!("tinker://{model_id}/{}/{name}", path_segment(kind))
}

/// The handle routes use: send jobs, watch completions.
#[derive(Clone)]
pub struct WorkerHandle {
    jobs: Sender<Job>,
    /// Counts finished jobs; routes wait on it for results.
    pub finished: watch::Receiver<u64>,
}

impl WorkerHandle {
    /// Queues `job`; false when the model thread is gone.
    pub fn send(&self, job: Job) -> bool {
        self.jobs.send(job).is_ok()
    }
}

/// Starts the model thread.
pub fn spawn(config: WorkerConfig, store: Arc<Store>) -> WorkerHandle {
    let (tx, rx) = mpsc::channel();
    let (done_tx, done_rx) = watch::channel(0u64);
    std::thread::Builder::new()
        .name("tinker-models".into())
        .spawn(move || run(config, store, rx, done_tx))
        .expect("spawn the model thread");
    WorkerHandle {
        jobs: tx,
        finished: done_rx,
    }
}

/// Outcome of one job.
type Outcome = Result<(&'static str, Vec<u8>), (String, &'static str)>;

fn run(config: WorkerConfig, store: Arc<Store>, jobs: Receiver<Job>, done: watch::Sender<u64>) {
    let mut state = State {
        models: HashMap::new(),
        samplers: Samplers::new(config.options),
        config,
        store: store.clone(),
    };
    while let Ok(job) = jobs.recv() {
        let started = std::time::Instant::now();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| state.run(job.op)))
            .unwrap_or_else(|panic| {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "the model thread panicked".into());
                Err((msg, "server"))
            });
        let finished = match outcome {
            Ok((content_type, body)) => FutureState::Completed {
                content_type: content_type.into(),
                body,
            },
            Err((error, category)) => {
                tracing::warn!(request_id = job.request_id, %error, "request failed");
                FutureState::Failed {
                    error,
                    category: category.into(),
                }
            }
        };
        tracing::debug!(
            request_id = job.request_id,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "request done"
        );
        if let Err(e) = store.finish_future(job.request_id, &finished) {
            tracing::error!(request_id = job.request_id, error = %e, "cannot store a result");
        }
        done.send_modify(|n| *n += 1);
    }
}

struct State {
    models: HashMap<String, TrainingModel>,
    samplers: Samplers,
    config: WorkerConfig,
    store: Arc<Store>,
}

fn user(e: impl std::fmt::Display) -> (String, &'static str) {
    (e.to_string(), "user")
}

fn server(e: impl std::fmt::Display) -> (String, &'static str) {
    (e.to_string(), "server")
}

fn json_body(v: serde_json::Value) -> Outcome {
    Ok((JSON, serde_json::to_vec(&v).expect("json")))
}

impl State {
    fn model(&mut self, id: &str) -> Result<&mut TrainingModel, (String, &'static str)> {
        self.models.get_mut(id).ok_or_else(|| {
            user(format!(
                "model `{id}` is not loaded on this server: its session finished, it was created \
                 before a restart (load its last save_state into a new training client), or its \
                 creation failed"
            ))
        })
    }

    /// Loads a new training model `model_id` of the base model.
    fn create(
        &mut self,
        model_id: &str,
        rank: i64,
        seed: u64,
    ) -> Result<(), (String, &'static str)> {
        let c = &self.config;
        let m = TrainingModel::new(&c.base_dir, &c.base_name, rank, seed, &c.options)
            .map_err(|e| user(format!("{e:#}")))?;
        self.models.insert(model_id.to_string(), m);
        Ok(())
    }

    /// Marks a checkpoint completed or failed as `saved` says; passes it on.
    fn record_save(
        &self,
        model_id: &str,
        checkpoint_id: &str,
        kind: &str,
        saved: Result<(), (String, &'static str)>,
    ) -> Result<(), (String, &'static str)> {
        let status = if saved.is_ok() { "completed" } else { "failed" };
        self.store
            .set_checkpoint_status(model_id, checkpoint_id, kind, status)
            .map_err(server)?;
        saved
    }

    fn run(&mut self, op: Op) -> Outcome {
        match op {
            Op::CreateModel {
                model_id,
                rank,
                seed,
            } => {
                self.create(&model_id, rank, seed)?;
                json_body(json!({"model_id": model_id, "type": "create_model"}))
            }
            Op::ForwardBackward {
                model_id,
                data,
                loss,
                backward,
            } => {
                let m = self.model(&model_id)?;
                m.check(&data, loss).map_err(user)?;
                let out = m
                    .pass(&data, loss, backward)
                    .map_err(|e| server(format!("{e:#}")))?;
                let record = ArrayRecord {
                    type_tag: String::new(),
                    fields: HashMap::from([
                        ("logprobs".to_string(), proto::batched_f32(&out.logprobs)),
                        (
                            "elementwise_loss".to_string(),
                            proto::batched_f32(&out.elementwise_loss),
                        ),
                    ]),
                    num_datums: data.len() as i64,
                };
                let msg = ForwardBackwardOutput {
                    loss_fn_output_type: "ArrayRecord".into(),
                    loss_fn_outputs: vec![record],
                    metrics: HashMap::from([("loss:sum".to_string(), out.loss)]),
                };
                Ok((PROTOBUF, msg.encode_to_vec()))
            }
            Op::OptimStep { model_id, adam } => {
                let m = self.model(&model_id)?;
                let norm = m.optim_step(&adam);
                json_body(json!({
                    "type": "optim_step",
                    "metrics": {"grad_norm:mean": norm, "learning_rate:mean": adam.learning_rate},
                }))
            }
            Op::SaveForSampler {
                model_id,
                checkpoint_id,
                sampling_session_id,
            } => {
                let dir = self
                    .config
                    .checkpoint_dir(&model_id, SAMPLER, &checkpoint_id);
                let base = self.config.base_dir.clone();
                let saved = self.model(&model_id).and_then(|m| {
                    m.write_sampler_weights(&dir, &base)
                        .map_err(|e| server(format!("{e:#}")))
                });
                self.record_save(&model_id, &checkpoint_id, SAMPLER, saved)?;
                self.samplers.evict(&dir);
                json_body(json!({
                    "path": tinker_path(&model_id, SAMPLER, &checkpoint_id),
                    "type": "save_weights_for_sampler",
                    "sampling_session_id": sampling_session_id,
                }))
            }
            Op::SaveWeights {
                model_id,
                checkpoint_id,
            } => {
                let dir = self
                    .config
                    .checkpoint_dir(&model_id, TRAINING, &checkpoint_id);
                let saved = match self.store.model(&model_id) {
                    Ok(row) => self.model(&model_id).and_then(|m| {
                        let meta = json!({
                            "base_model": row.base_model,
                            "lora_rank": row.lora_rank,
                            "lora_seed": row.lora_seed,
                            "steps": m.steps(),
                        });
                        m.save_state(&dir, &meta)
                            .map_err(|e| server(format!("{e:#}")))
                    }),
                    Err(e) => Err(server(e)),
                };
                self.record_save(&model_id, &checkpoint_id, TRAINING, saved)?;
                json_body(json!({
                    "path": tinker_path(&model_id, TRAINING, &checkpoint_id),
                    "type": "save_weights",
                }))
            }
            Op::LoadWeights {
                model_id,
                source,
                optimizer,
                create,
            } => {
                if let Some((rank, seed)) = create {
                    self.create(&model_id, rank, seed)?;
                }
                self.model(&model_id)?
                    .load_state(&source, optimizer)
                    .map_err(|e| user(format!("{e:#}")))?;
                json_body(json!({"type": "load_weights"}))
            }
            Op::Unload { model_ids } => {
                for id in &model_ids {
                    self.models.remove(id);
                }
                json_body(json!({"type": "unload_model", "model_ids": model_ids}))
            }
            Op::Sample {
                dir,
                prompt,
                num_samples,
                params,
                prompt_logprobs,
            } => {
                let out = self
                    .samplers
                    .sample(&dir, &prompt, num_samples, &params, prompt_logprobs)
                    .map_err(|e| match e {
                        SampleError::User(m) => user(m),
                        SampleError::Server(e) => server(format!("{e:#}")),
                    })?;
                Ok((PROTOBUF, out.encode_to_vec()))
            }
        }
    }
}
