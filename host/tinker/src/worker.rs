//! The one thread that runs the models: jobs wait in one lane per client
//! (session), served round-robin ([`FairQueue`]): a lane's jobs run in the
//! order the routes accepted them (so a model's calls apply in the order its
//! client sent them), and no client's backlog holds up the others. Each job
//! ends its future in the store, and waiters are woken. A job
//! that fails (bad data, a panic in the model) fails its future with the
//! error; the thread keeps serving.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;

use prost::Message;
use serde_json::json;
use skyrl_model::{LoadOptions, SamplingParams};
use tokio::sync::watch;

use crate::loss::LossFn;
use crate::proto::{self, ArrayRecord, ForwardBackwardOutput};
use crate::queue::FairQueue;
use crate::replicas::{shard, Ranks, Replicated};
use crate::sampler::{SampleError, Samplers};
use crate::store::{FutureState, Store};
use crate::training::{DatumInput, PassOutput, TrainingModel};

/// Content type of protobuf results.
pub const PROTOBUF: &str = "application/x-protobuf";
/// Content type of JSON results.
pub const JSON: &str = "application/json";

/// Work for the model thread.
pub enum Op {
    /// A training request every rank applies (create, forward-backward,
    /// optimizer step, load, unload).
    Train(Replicated),
    SaveForSampler {
        model_id: String,
        checkpoint_id: String,
        sampling_session_id: Option<String>,
    },
    /// Weights for use elsewhere (`save_weights_external`).
    SaveExternal {
        model_id: String,
        checkpoint_id: String,
    },
    /// A training checkpoint (`save_state`).
    SaveWeights {
        model_id: String,
        checkpoint_id: String,
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

/// A training checkpoint (`save_state`), sampler weights and external
/// weights (`save_weights_external`), as the store names their kinds.
pub const TRAINING: &str = "training";
pub const SAMPLER: &str = "sampler";
pub const EXTERNAL: &str = "external";

/// The path segment of a checkpoint kind: `weights` (training),
/// `sampler_weights` or `external_weights`.
pub fn path_segment(kind: &str) -> &'static str {
    match kind {
        TRAINING => "weights",
        EXTERNAL => "external_weights",
        _ => "sampler_weights",
    }
}

/// The checkpoint kind of a path segment, if it is one.
pub fn segment_kind(segment: &str) -> Option<&'static str> {
    [TRAINING, SAMPLER, EXTERNAL]
        .into_iter()
        .find(|kind| path_segment(kind) == segment)
}

/// The `tinker://MODEL/SEGMENT/NAME` path of a checkpoint.
pub fn tinker_path(model_id: &str, kind: &str, name: &str) -> String {
    format!("tinker://{model_id}/{}/{name}", path_segment(kind))
}

/// The handle routes use: send jobs, watch completions.
#[derive(Clone)]
pub struct WorkerHandle {
    jobs: Arc<FairQueue<Job>>,
    /// Counts finished jobs; routes wait on it for results.
    pub finished: watch::Receiver<u64>,
}

impl WorkerHandle {
    /// Queues `job` in `lane` (its client); false when the model thread is gone.
    pub fn send(&self, lane: &str, job: Job) -> bool {
        self.jobs.push(lane, job)
    }
}

/// Starts the model thread (rank 0 of `ranks`).
pub fn spawn(config: WorkerConfig, store: Arc<Store>, ranks: Ranks) -> WorkerHandle {
    let jobs = Arc::new(FairQueue::default());
    let (done_tx, done_rx) = watch::channel(0u64);
    let queue = jobs.clone();
    std::thread::Builder::new()
        .name("tinker-models".into())
        .spawn(move || {
            run(config, store, ranks, &queue, done_tx);
            queue.close();
        })
        .expect("spawn the model thread");
    WorkerHandle {
        jobs,
        finished: done_rx,
    }
}

/// Outcome of one job.
type Outcome = Result<(&'static str, Vec<u8>), (String, &'static str)>;

fn run(
    config: WorkerConfig,
    store: Arc<Store>,
    ranks: Ranks,
    jobs: &FairQueue<Job>,
    done: watch::Sender<u64>,
) {
    let mut state = State {
        samplers: Samplers::new(config.options),
        models: Models::new(config, ranks),
        store: store.clone(),
    };
    while let Some(job) = jobs.pop() {
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

/// The other ranks' loop: apply each training request rank 0 sends, until
/// rank 0 (or the job's store) is gone.
pub fn follow(config: WorkerConfig, ranks: Ranks) -> anyhow::Result<()> {
    let mut models = Models::new(config, ranks);
    loop {
        let r = models.ranks.receive()?;
        if let Err((error, _)) = models.apply(r) {
            tracing::warn!(%error, "request failed on this rank");
        }
        if let Some(broken) = &models.broken {
            anyhow::bail!("{broken}");
        }
    }
}

/// Rank 0's model thread state.
struct State {
    models: Models,
    samplers: Samplers,
    store: Arc<Store>,
}

/// The training models of this rank, and the ranks they are replicated on.
struct Models {
    models: HashMap<String, TrainingModel>,
    config: WorkerConfig,
    ranks: Ranks,
    /// Why the ranks can no longer work together, once a collective failed.
    broken: Option<String>,
}

/// What a replicated request produced.
enum Applied {
    Done,
    /// Every datum's results, in order, gathered from the ranks.
    Passed(PassOutput),
    /// The gradient norm before clipping.
    Stepped(f64),
}

type Fail = (String, &'static str);

fn user(e: impl std::fmt::Display) -> Fail {
    (e.to_string(), "user")
}

fn server(e: impl std::fmt::Display) -> Fail {
    (e.to_string(), "server")
}

fn json_body(v: serde_json::Value) -> Outcome {
    Ok((JSON, serde_json::to_vec(&v).expect("json")))
}

fn not_loaded(id: &str) -> Fail {
    user(format!(
        "model `{id}` is not loaded on this server: its session finished, it was created \
         before a restart (load its last save_state into a new training client), or its \
         creation failed"
    ))
}

impl Models {
    fn new(config: WorkerConfig, ranks: Ranks) -> Self {
        Self {
            models: HashMap::new(),
            config,
            ranks,
            broken: None,
        }
    }

    fn model(&mut self, id: &str) -> Result<&mut TrainingModel, Fail> {
        self.models.get_mut(id).ok_or_else(|| not_loaded(id))
    }

    /// Loads a new training model `model_id` of the base model.
    fn create(&mut self, model_id: &str, rank: i64, seed: u64) -> Result<(), Fail> {
        let c = &self.config;
        let m = TrainingModel::new(&c.base_dir, &c.base_name, rank, seed, &c.options)
            .map_err(|e| user(format!("{e:#}")))?;
        self.models.insert(model_id.to_string(), m);
        Ok(())
    }

    /// Notes a failed collective: the ranks no longer work together.
    fn group_failed(&mut self, e: anyhow::Error) -> Fail {
        let msg = format!("the ranks behind this server failed together: {e:#}");
        self.broken = Some(msg.clone());
        server(msg)
    }

    /// Rank 0: sends `r` to the other ranks, then applies it here.
    fn replicate(&mut self, r: Replicated) -> Result<Applied, Fail> {
        if let Some(broken) = &self.broken {
            return Err(server(format!(
                "{broken}; restart the server (saved checkpoints stay usable)"
            )));
        }
        if let Err(e) = self.ranks.send(&r) {
            return Err(self.group_failed(e));
        }
        self.apply(r)
    }

    /// Applies a training request on this rank (every rank runs the same
    /// requests in the same order).
    fn apply(&mut self, r: Replicated) -> Result<Applied, Fail> {
        match r {
            Replicated::Create {
                model_id,
                rank,
                seed,
            } => {
                self.create(&model_id, rank, seed)?;
                Ok(Applied::Done)
            }
            Replicated::ForwardBackward {
                model_id,
                data,
                loss,
                backward,
            } => self.forward_backward(&model_id, &data, loss, backward),
            Replicated::OptimStep { model_id, adam } => {
                let mut grads = self.model(&model_id)?.gradients();
                if let Err(e) = self.ranks.sum(&mut grads) {
                    return Err(self.group_failed(e));
                }
                Ok(Applied::Stepped(self.model(&model_id)?.optim_step(&adam)))
            }
            Replicated::Load {
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
                Ok(Applied::Done)
            }
            Replicated::Unload { model_ids } => {
                for id in &model_ids {
                    self.models.remove(id);
                }
                Ok(Applied::Done)
            }
        }
    }

    /// This rank's part of the datums, then every rank's results in order.
    fn forward_backward(
        &mut self,
        model_id: &str,
        data: &[DatumInput],
        loss: LossFn,
        backward: bool,
    ) -> Result<Applied, Fail> {
        let (rank, world) = (self.ranks.rank(), self.ranks.world());
        let m = self.model(model_id)?;
        // The same check on every rank: all refuse, or none does.
        m.check(data, loss).map_err(user)?;
        let part = shard(data.len(), rank, world);
        let local = if !part.is_empty() {
            m.pass(&data[part], loss, backward)
        } else if backward {
            // No datum here: a pass with zero weights keeps this rank's
            // gradients defined (zero) for the sum over the ranks.
            let mut idle = data[0].clone();
            idle.weights.iter_mut().for_each(|w| *w = 0.0);
            idle.advantages.iter_mut().for_each(|a| *a = 0.0);
            m.pass(&[idle], loss, true).map(|_| PassOutput::default())
        } else {
            Ok(PassOutput::default())
        }
        .map_err(|e| format!("{e:#}"));
        if world == 1 {
            return local.map(Applied::Passed).map_err(server);
        }
        let parts = match self.ranks.gather(local) {
            Ok(parts) => parts,
            Err(e) => return Err(self.group_failed(e)),
        };
        let mut all = PassOutput::default();
        for (r, part) in parts.into_iter().enumerate() {
            let part = part.map_err(|e| server(format!("rank {r}: {e}")))?;
            all.logprobs.extend(part.logprobs);
            all.elementwise_loss.extend(part.elementwise_loss);
            all.loss += part.loss;
        }
        Ok(Applied::Passed(all))
    }
}

impl State {
    fn model(&mut self, id: &str) -> Result<&mut TrainingModel, Fail> {
        self.models.model(id)
    }

    /// Marks a checkpoint completed or failed as `saved` says; passes it on.
    fn record_save(
        &self,
        model_id: &str,
        checkpoint_id: &str,
        kind: &str,
        saved: Result<(), Fail>,
    ) -> Result<(), Fail> {
        let status = if saved.is_ok() { "completed" } else { "failed" };
        self.store
            .set_checkpoint_status(model_id, checkpoint_id, kind, status)
            .map_err(server)?;
        saved
    }

    /// Runs a training request on every rank; answers as the client expects.
    fn train(&mut self, r: Replicated) -> Outcome {
        let reply = match &r {
            Replicated::Create { model_id, .. } => {
                json!({"model_id": model_id, "type": "create_model"})
            }
            Replicated::Load { .. } => json!({"type": "load_weights"}),
            Replicated::Unload { model_ids } => {
                json!({"type": "unload_model", "model_ids": model_ids})
            }
            Replicated::OptimStep { adam, .. } => json!({
                "type": "optim_step",
                "metrics": {"learning_rate:mean": adam.learning_rate},
            }),
            // The protobuf answer below; its datum count.
            Replicated::ForwardBackward { data, .. } => json!({"num_datums": data.len()}),
        };
        match self.models.replicate(r)? {
            Applied::Done => json_body(reply),
            Applied::Stepped(norm) => {
                let mut reply = reply;
                reply["metrics"]["grad_norm:mean"] = json!(norm);
                json_body(reply)
            }
            Applied::Passed(out) => {
                let record = ArrayRecord {
                    type_tag: String::new(),
                    fields: HashMap::from([
                        ("logprobs".to_string(), proto::batched_f32(&out.logprobs)),
                        (
                            "elementwise_loss".to_string(),
                            proto::batched_f32(&out.elementwise_loss),
                        ),
                    ]),
                    num_datums: reply["num_datums"].as_i64().unwrap_or_default(),
                };
                let msg = ForwardBackwardOutput {
                    loss_fn_output_type: "ArrayRecord".into(),
                    loss_fn_outputs: vec![record],
                    metrics: HashMap::from([("loss:sum".to_string(), out.loss)]),
                };
                Ok((PROTOBUF, msg.encode_to_vec()))
            }
        }
    }

    /// Writes checkpoint `checkpoint_id` of `kind` of `model_id` with
    /// `write(model, dir, base_dir)` and records how it went; its directory.
    fn write_checkpoint(
        &mut self,
        model_id: &str,
        kind: &str,
        checkpoint_id: &str,
        write: impl FnOnce(&TrainingModel, &std::path::Path, &std::path::Path) -> anyhow::Result<()>,
    ) -> Result<PathBuf, Fail> {
        let dir = self
            .models
            .config
            .checkpoint_dir(model_id, kind, checkpoint_id);
        let base = self.models.config.base_dir.clone();
        let saved = self
            .model(model_id)
            .and_then(|m| write(m, &dir, &base).map_err(|e| server(format!("{e:#}"))));
        self.record_save(model_id, checkpoint_id, kind, saved)?;
        Ok(dir)
    }

    fn run(&mut self, op: Op) -> Outcome {
        match op {
            Op::Train(r) => self.train(r),
            Op::SaveForSampler {
                model_id,
                checkpoint_id,
                sampling_session_id,
            } => {
                let dir =
                    self.write_checkpoint(&model_id, SAMPLER, &checkpoint_id, |m, dir, base| {
                        m.write_sampler_weights(dir, base)
                    })?;
                self.samplers.evict(&dir);
                json_body(json!({
                    "path": tinker_path(&model_id, SAMPLER, &checkpoint_id),
                    "type": "save_weights_for_sampler",
                    "sampling_session_id": sampling_session_id,
                }))
            }
            Op::SaveExternal {
                model_id,
                checkpoint_id,
            } => {
                let dir =
                    self.write_checkpoint(&model_id, EXTERNAL, &checkpoint_id, |m, dir, base| {
                        m.write_external(dir, base)
                    })?;
                json_body(json!({
                    "path": tinker_path(&model_id, EXTERNAL, &checkpoint_id),
                    "size_bytes": crate::checkpoints::dir_files(&dir)
                        .iter()
                        .map(|(_, len)| len)
                        .sum::<u64>(),
                    "type": "save_weights_external",
                }))
            }
            Op::SaveWeights {
                model_id,
                checkpoint_id,
            } => {
                let row = self.store.model(&model_id);
                self.write_checkpoint(&model_id, TRAINING, &checkpoint_id, |m, dir, _| {
                    let row = row?;
                    let meta = json!({
                        "base_model": row.base_model,
                        "lora_rank": row.lora_rank,
                        "lora_seed": row.lora_seed,
                        "steps": m.steps(),
                    });
                    m.save_state(dir, &meta)
                })?;
                json_body(json!({
                    "path": tinker_path(&model_id, TRAINING, &checkpoint_id),
                    "type": "save_weights",
                }))
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
