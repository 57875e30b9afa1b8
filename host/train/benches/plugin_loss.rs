//! What a sandboxed policy-loss plugin costs per training step, side by side
//! with the built-in loss it re-implements, on the `small` model (hidden 256,
//! 4 layers, 3.0M parameters), fp32, one thread.
//!
//! One step here is the part of a policy update the loss sits in: the
//! forward pass over a micro-batch (response log-probs), the loss, and the
//! backward pass. Pairs: built-in `regular` vs the Rust plugin
//! (`plugins/ppo_algorithms`), built-in `dppo` vs the Python plugin
//! (`plugins/python_algorithms`). Prints the median step time of each, the
//! loss call alone, and the plugin/built-in ratios.
//!
//! Run: `cargo bench -p skyrl-train --bench plugin_loss` (needs
//! `artifacts/plugins/{ppo_algorithms,python_algorithms}.wasm` from
//! scripts/build-plugins). `-- --rows N --response T --iters K` change the
//! micro-batch (default 32 x 96 response tokens after a 32-token prompt) and
//! the number of timed steps (default 10).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use common::{median, number_flag};
use skyrl_model::{init_tiny_model, Arch, CausalLm, LoadOptions, TinySize};
use skyrl_runtime::{Plugin, PluginEngine};
use skyrl_train::algorithms::loss::{actor_loss, ActorBatch};
use skyrl_train::algorithms::{
    register_algorithm_plugins, AdvantageEstimatorRegistry, PolicyLossRegistry,
};
use skyrl_train::config::AlgorithmConfig;
use tch::{Device, Kind, Tensor};

const PROMPT: i64 = 32;

struct Args {
    rows: i64,
    response: i64,
    iters: usize,
}

fn args() -> Args {
    let mut a = Args {
        rows: 32,
        response: 96,
        iters: 10,
    };
    let argv: Vec<String> = std::env::args().collect();
    let value = |flag: &str| number_flag(&argv, flag);
    a.rows = value("--rows").unwrap_or(a.rows);
    a.response = value("--response").unwrap_or(a.response);
    a.iters = value("--iters").map(|v| v as usize).unwrap_or(a.iters);
    if argv.iter().any(|x| x == "--test") {
        a.iters = 1;
    }
    a
}

fn plugin(name: &str) -> Plugin {
    let wasm = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../artifacts/plugins")
        .join(format!("{name}.wasm"));
    assert!(
        wasm.is_file(),
        "{} is missing: run scripts/build-plugins",
        wasm.display()
    );
    Plugin::load(&PluginEngine::shared().unwrap(), &wasm).unwrap()
}

/// The fixed micro-batch: token ids, old/rollout log-probs, advantages, mask.
struct Batch {
    ids: Tensor,
    attn: Tensor,
    old: Tensor,
    advantages: Tensor,
    mask: Tensor,
}

fn batch(model: &CausalLm, rows: i64, response: i64) -> Batch {
    tch::manual_seed(7);
    let len = PROMPT + response;
    let ids = Tensor::randint(99, [rows, len], (Kind::Int64, Device::Cpu));
    let attn = Tensor::ones([rows, len], (Kind::Int64, Device::Cpu));
    let lp = tch::no_grad(|| logprobs(model, &ids, &attn, response));
    let old = &lp + Tensor::randn([rows, response], (Kind::Float, Device::Cpu)) * 0.1;
    let lens = Tensor::randint_low(
        response / 2,
        response + 1,
        [rows, 1],
        (Kind::Int64, Device::Cpu),
    );
    let pos = Tensor::arange(response, (Kind::Int64, Device::Cpu)).unsqueeze(0);
    let mask = pos.lt_tensor(&lens).to_kind(Kind::Float);
    let advantages =
        Tensor::randn([rows, 1], (Kind::Float, Device::Cpu)) * &mask / mask.sum(Kind::Float);
    Batch {
        ids,
        attn,
        old,
        advantages,
        mask,
    }
}

fn logprobs(model: &CausalLm, ids: &Tensor, attn: &Tensor, response: i64) -> Tensor {
    let lp = model.forward_logprobs(ids, attn).expect("forward");
    lp.narrow(1, PROMPT - 1, response)
}

/// One step (forward, loss, backward) with `cfg`: (step seconds, loss seconds).
fn step(
    model: &CausalLm,
    b: &Batch,
    reg: &PolicyLossRegistry,
    cfg: &AlgorithmConfig,
    response: i64,
) -> (f64, f64) {
    let start = Instant::now();
    let lp = logprobs(model, &b.ids, &b.attn, response);
    let loss_start = Instant::now();
    let out = actor_loss(
        reg,
        cfg,
        &ActorBatch {
            log_probs: &lp,
            old_log_probs: &b.old,
            advantages: &b.advantages,
            loss_mask: &b.mask,
            rollout_logprobs: None,
            ref_log_probs: None,
            logits: None,
            aux_weight: 1.0,
        },
    )
    .expect("loss");
    let loss_time = loss_start.elapsed().as_secs_f64();
    out.loss.backward();
    let step_time = start.elapsed().as_secs_f64();
    for (_, p) in model.named_parameters() {
        let mut g = p.grad();
        if g.defined() {
            let _ = g.zero_();
        }
    }
    (step_time, loss_time)
}

/// Medians over `iters` steps of each config, the two alternating step by
/// step (after one warm-up each) so machine noise hits both alike:
/// `[(step, loss); 2]`.
fn time_pair(
    model: &CausalLm,
    b: &Batch,
    reg: &PolicyLossRegistry,
    cfgs: [&AlgorithmConfig; 2],
    response: i64,
    iters: usize,
) -> [(f64, f64); 2] {
    let mut samples: [(Vec<f64>, Vec<f64>); 2] = Default::default();
    for i in 0..iters + 1 {
        for (cfg, (steps, losses)) in cfgs.iter().zip(samples.iter_mut()) {
            let (s, l) = step(model, b, reg, cfg, response);
            if i > 0 {
                steps.push(s);
                losses.push(l);
            }
        }
    }
    samples.map(|(s, l)| (median(&s), median(&l)))
}

fn main() {
    tch::set_num_threads(1);
    let a = args();
    let dir = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Small, dir.path(), 1).unwrap();
    let model = CausalLm::from_pretrained(
        dir.path(),
        &LoadOptions {
            device: Device::Cpu,
            kind: Kind::Float,
        },
    )
    .unwrap();
    let b = batch(&model, a.rows, a.response);
    let cfg = AlgorithmConfig {
        use_kl_loss: false,
        ..AlgorithmConfig::default()
    };
    let plugins: BTreeMap<String, Plugin> = [
        ("rust".to_string(), plugin("ppo_algorithms")),
        ("py".to_string(), plugin("python_algorithms")),
    ]
    .into();
    let mut adv = AdvantageEstimatorRegistry::with_defaults();
    let mut reg = PolicyLossRegistry::with_defaults();
    register_algorithm_plugins(&plugins, &cfg, &mut adv, &mut reg).unwrap();
    println!(
        "small model ({} parameters), micro-batch {} x ({} prompt + {} response) tokens, fp32, 1 thread, median of {}",
        model.num_parameters(),
        a.rows,
        PROMPT,
        a.response,
        a.iters
    );
    println!(
        "{:<26} {:>10} {:>12} {:>14} {:>12}",
        "loss", "step (ms)", "loss (ms)", "step ratio", "loss ratio"
    );
    for (builtin, plugin_name) in [("regular", "plugin:rust"), ("dppo", "plugin:py")] {
        let with = |name: &str| AlgorithmConfig {
            policy_loss_type: name.into(),
            ..cfg.clone()
        };
        let (c0, c1) = (with(builtin), with(plugin_name));
        let [(s0, l0), (s1, l1)] = time_pair(&model, &b, &reg, [&c0, &c1], a.response, a.iters);
        println!(
            "{:<26} {:>10.1} {:>12.2} {:>14} {:>12}",
            builtin,
            s0 * 1e3,
            l0 * 1e3,
            "1.00x",
            "1.00x"
        );
        println!(
            "{:<26} {:>10.1} {:>12.2} {:>13.2}x {:>11.1}x",
            format!("{plugin_name} ({builtin})"),
            s1 * 1e3,
            l1 * 1e3,
            s1 / s0,
            l1 / l0
        );
    }
}
