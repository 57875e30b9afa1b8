//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use tch::{Device, Kind, Tensor};

use skyrl_model::{Arch, CausalLm, LoadOptions, TinySize};

/// CPU fp32 options (tests are deterministic on the CPU).
pub fn cpu() -> LoadOptions {
    LoadOptions {
        device: Device::Cpu,
        kind: Kind::Float,
    }
}

/// The Python interpreter with torch + transformers: `$SKYRL_PYTHON`, else the
/// project venv. Panics with an explanation when it is missing or broken:
/// parity tests must not pass without their reference.
pub fn python() -> PathBuf {
    let path = std::env::var_os("SKYRL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv/bin/python")
        });
    assert!(
        path.exists(),
        "parity reference unavailable: Python interpreter {} not found. Set SKYRL_PYTHON to a \
         Python with torch and transformers installed.",
        path.display()
    );
    let probe = Command::new(&path)
        .args(["-c", "import torch, transformers"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    assert!(
        probe.status.success(),
        "parity reference unavailable: `{} -c 'import torch, transformers'` failed:\n{}",
        path.display(),
        String::from_utf8_lossy(&probe.stderr)
    );
    path
}

/// Runs `tests/py/<script>` with `args`; panics with stderr on failure.
pub fn run_python(script: &str, args: &[&Path]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(script);
    let out = Command::new(python())
        .arg(&script)
        .args(args)
        .output()
        .expect("spawn python");
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes a tiny model and returns it loaded on the CPU with weights perturbed
/// away from the init (norms, biases and all), so every parameter matters.
pub fn perturbed_tiny(arch: Arch, dir: &Path, seed: u64) -> CausalLm {
    // The init and the noise draw from libtorch's global RNG: tests of one
    // binary run in parallel, so one model is drawn at a time.
    static INIT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = INIT.lock().unwrap_or_else(|e| e.into_inner());
    skyrl_model::init_tiny_model(arch, TinySize::Tiny, dir, seed).expect("init tiny model");
    let model = CausalLm::from_pretrained(dir, &cpu()).expect("load tiny model");
    tch::manual_seed(seed as i64 + 1);
    tch::no_grad(|| {
        for (_, mut var) in model.var_store().variables() {
            let noise = Tensor::randn_like(&var) * 0.05;
            let _ = var.g_add_(&noise);
        }
    });
    model
}

/// Two rows of 8 token ids and their attention mask; the first row ends in
/// two padding positions.
pub fn batch() -> (Tensor, Tensor) {
    let ids = Tensor::from_slice(&[5i64, 9, 40, 41, 42, 7, 0, 0, 60, 61, 62, 63, 64, 65, 66, 67])
        .view([2, 8]);
    let mask =
        Tensor::from_slice(&[1i64, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]).view([2, 8]);
    (ids, mask)
}

/// Max absolute difference of two float tensors.
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}
