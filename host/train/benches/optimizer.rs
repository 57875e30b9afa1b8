//! One optimizer step (grad-norm clipping + AdamW) on ~110M fp32 parameters,
//! one thread: the element-wise AdamW this crate had before (per-tensor
//! clipping in f64, a handful of tensor ops per parameter) against the
//! current [`AdamW`] on libtorch's fused kernels, and torch.optim.AdamW
//! (single-tensor, foreach and fused; `bench/optimizer_torch.py`) on the
//! same shapes, side by side.
//!
//! Parameters: a Qwen2-style decoder (hidden 768, 12 layers, MLP 2048,
//! vocab 32000, tied embeddings; 109.5M). Every gradient is random and fixed;
//! each step clips to norm 1 and updates with weight decay. The old and new
//! Rust steps alternate after one untimed step each, so machine noise hits
//! both alike; each figure is the median step time (Python: the same, run
//! after the Rust steps).
//!
//! Run: `OMP_WAIT_POLICY=PASSIVE cargo bench -p skyrl-train --bench optimizer`
//! (`-- --iters K --layers L` change the number of timed steps, default 5,
//! and the depth). Needs Python with torch (`$SKYRL_PYTHON`).

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

mod common;

use common::{median, number_flag, HP, MAX_NORM};
use skyrl_train::optim::{AdamW, LrSchedule};
use tch::{Device, Kind, Tensor};

/// The optimizer step before the fused kernels (commit b0a4f1b), verbatim
/// in its arithmetic: the baseline.
struct ElementwiseAdamW {
    params: Vec<Tensor>,
    exp_avg: Vec<Tensor>,
    exp_avg_sq: Vec<Tensor>,
    step: i64,
}

impl ElementwiseAdamW {
    fn new(params: &[Tensor]) -> Self {
        let zeros = |p: &Tensor| p.zeros_like().detach();
        Self {
            params: params.iter().map(Tensor::shallow_clone).collect(),
            exp_avg: params.iter().map(zeros).collect(),
            exp_avg_sq: params.iter().map(zeros).collect(),
            step: 0,
        }
    }

    fn step(&mut self) {
        let _g = tch::no_grad_guard();
        let grads: Vec<Tensor> = self.params.iter().map(Tensor::grad).collect();
        let squares: f64 = grads
            .iter()
            .map(|t| {
                t.to_kind(Kind::Double)
                    .square()
                    .sum(Kind::Double)
                    .double_value(&[])
            })
            .sum();
        let clip = (MAX_NORM / (squares.sqrt() + 1e-6)).min(1.0);
        if clip < 1.0 {
            for mut g in grads.iter().map(Tensor::shallow_clone) {
                let _ = g.f_mul_scalar_(clip);
            }
        }
        self.step += 1;
        let (lr, t) = (HP.lr, self.step as f64);
        let bc1 = 1.0 - HP.beta1.powf(t);
        let bc2_sqrt = (1.0 - HP.beta2.powf(t)).sqrt();
        for (i, grad) in grads.iter().enumerate() {
            let (target, m, v) = (
                &mut self.params[i],
                &mut self.exp_avg[i],
                &mut self.exp_avg_sq[i],
            );
            let _ = target.f_mul_scalar_(1.0 - lr * HP.weight_decay);
            let _ = m.f_lerp_(grad, 1.0 - HP.beta1);
            let _ = v.f_mul_scalar_(HP.beta2);
            let _ = v.f_add_(&(grad * grad * (1.0 - HP.beta2)));
            let denom = v.sqrt() / bc2_sqrt + HP.eps;
            let update = (&*m / denom) * (-lr / bc1);
            let _ = target.f_add_(&update);
        }
    }
}

/// Shapes of a Qwen2-style decoder's parameters (tied embeddings).
fn shapes(hidden: i64, layers: i64, mlp: i64, vocab: i64) -> Vec<Vec<i64>> {
    let mut s = vec![vec![vocab, hidden], vec![hidden]];
    for _ in 0..layers {
        for shape in [
            vec![hidden, hidden], // q
            vec![hidden],
            vec![hidden, hidden], // k
            vec![hidden],
            vec![hidden, hidden], // v
            vec![hidden],
            vec![hidden, hidden], // o
            vec![mlp, hidden],    // gate
            vec![mlp, hidden],    // up
            vec![hidden, mlp],    // down
            vec![hidden],         // input norm
            vec![hidden],         // post-attention norm
        ] {
            s.push(shape);
        }
    }
    s
}

fn python() -> PathBuf {
    std::env::var_os("SKYRL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv/bin/python")
        })
}

/// Median step seconds of torch.optim.AdamW: (single-tensor, foreach, fused).
fn torch_times(shapes: &[Vec<i64>], iters: usize) -> (f64, f64, f64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = dir.path().join("shapes.json");
    std::fs::write(&spec, serde_json::to_string(shapes).unwrap()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/optimizer_torch.py");
    let out = Command::new(python())
        .arg(script)
        .arg(&spec)
        .arg(iters.to_string())
        .arg("1")
        .env("OMP_NUM_THREADS", "1")
        .output()
        .expect("cannot start Python (set SKYRL_PYTHON)");
    assert!(
        out.status.success(),
        "optimizer_torch.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    let f = |k: &str| v[k].as_f64().expect("seconds");
    (f("single"), f("foreach"), f("fused"))
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let value = |flag: &str| number_flag(&argv, flag);
    let test = argv.iter().any(|x| x == "--test");
    let iters = value("--iters").unwrap_or(if test { 1 } else { 5 }) as usize;
    let layers = value("--layers").unwrap_or(if test { 1 } else { 12 });
    let (hidden, mlp, vocab) = if test {
        (64, 128, 512)
    } else {
        (768, 2048, 32000)
    };
    tch::set_num_threads(1);
    tch::manual_seed(0);
    let shapes = shapes(hidden, layers, mlp, vocab);
    let params: Vec<Tensor> = shapes
        .iter()
        .map(|s| {
            (Tensor::randn(s.as_slice(), (Kind::Float, Device::Cpu)) * 0.02).set_requires_grad(true)
        })
        .collect();
    for p in &params {
        // d/dp sum(p * g) = g: a fixed random gradient
        let g = Tensor::randn_like(p);
        (p * g).sum(Kind::Float).backward();
    }
    let numel: i64 = shapes.iter().map(|s| s.iter().product::<i64>()).sum();
    let named: Vec<(String, Tensor)> = params
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("p{i:03}"), p.shallow_clone()))
        .collect();
    let mut new = AdamW::new(named, HP, LrSchedule::Constant);
    let mut old = ElementwiseAdamW::new(&params);
    let (mut t_old, mut t_new) = (Vec::new(), Vec::new());
    for k in 0..=iters {
        let t = Instant::now();
        old.step();
        let a = t.elapsed().as_secs_f64();
        let t = Instant::now();
        new.step(MAX_NORM);
        let b = t.elapsed().as_secs_f64();
        if k > 0 {
            t_old.push(a);
            t_new.push(b);
        }
    }
    drop((old, new, params));
    let (old, new) = (median(&t_old), median(&t_new));
    let (single, foreach, fused) = torch_times(&shapes, iters);
    println!(
        "optimizer step (clip_grad_norm 1.0 + AdamW), {:.1}M fp32 parameters in {} tensors, 1 thread, median of {iters}",
        numel as f64 / 1e6,
        shapes.len()
    );
    println!(
        "  {:<40} {:>9}  {:>12}  {:>14}",
        "", "s/step", "vs old Rust", "vs torch single"
    );
    for (name, s) in [
        ("skyrl, element-wise (before)", old),
        ("skyrl, fused (_fused_adamw_)", new),
        ("torch AdamW single-tensor (CPU default)", single),
        ("torch AdamW foreach=True", foreach),
        ("torch AdamW fused=True", fused),
    ] {
        println!(
            "  {name:<40} {s:>9.3}  {:>11.2}x  {:>13.2}x",
            old / s,
            single / s
        );
    }
    println!("  (ratios: how many times faster than the baseline of the column)");
}
