//! Shared test helpers: running the PyTorch reference scripts and comparing tensors.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};
use tch::{Kind, Tensor};

pub mod inputs;

/// The Python interpreter with torch: `$SKYRL_PYTHON`, else the project venv.
/// Panics (failing the test) when neither exists — parity is never skipped.
pub fn python() -> PathBuf {
    let p = std::env::var_os("SKYRL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv/bin/python")
        });
    assert!(
        p.exists(),
        "parity tests need Python with torch + safetensors: set SKYRL_PYTHON (tried {})",
        p.display()
    );
    p
}

/// Path of a committed reference script.
pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/reference")
        .join(name)
}

/// Runs `script` with `args`, panicking with its stderr on failure.
pub fn run_python(script_name: &str, args: &[&std::path::Path]) {
    let out = Command::new(python())
        .arg(script(script_name))
        .args(args)
        .output()
        .expect("cannot start the Python reference");
    assert!(
        out.status.success(),
        "reference script {script_name} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Collects inputs and cases, runs a reference script once, returns its outputs.
#[derive(Default)]
pub struct Reference {
    cases: Vec<Value>,
    inputs: Vec<(String, Tensor)>,
}

impl Reference {
    pub fn input(&mut self, key: &str, t: &Tensor) -> String {
        if !self.inputs.iter().any(|(k, _)| k == key) {
            self.inputs.push((
                key.to_string(),
                t.detach().to_kind(Kind::Float).contiguous(),
            ));
        }
        key.to_string()
    }

    pub fn case(&mut self, name: &str, func: &str, params: Value, inputs: &[(&str, &str)]) {
        let inputs: serde_json::Map<String, Value> = inputs
            .iter()
            .map(|(a, k)| (a.to_string(), json!(k)))
            .collect();
        self.cases
            .push(json!({"name": name, "fn": func, "params": params, "inputs": inputs}));
    }

    pub fn run(self) -> HashMap<String, Tensor> {
        self.run_script("skyrl_reference.py")
    }

    /// Runs the reference script `name` (same spec format) once.
    pub fn run_script(self, name: &str) -> HashMap<String, Tensor> {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("spec.json");
        let inp = dir.path().join("in.safetensors");
        let out = dir.path().join("out.safetensors");
        std::fs::write(
            &spec,
            serde_json::to_vec(&json!({"cases": self.cases})).unwrap(),
        )
        .unwrap();
        Tensor::write_safetensors(&self.inputs, &inp).unwrap();
        run_python(name, &[&spec, &inp, &out]);
        Tensor::read_safetensors(&out)
            .unwrap()
            .into_iter()
            .collect()
    }
}

/// Max |a - b| / max(1, |b|) over all elements.
pub fn max_rel_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.size(), b.size(), "shape mismatch");
    let a = a.to_kind(Kind::Double);
    let b = b.to_kind(Kind::Double);
    let diff = (&a - &b).abs() / b.abs().clamp_min(1.0);
    if diff.numel() == 0 {
        return 0.0;
    }
    diff.max().double_value(&[])
}

/// Asserts `a ≈ b` within `tol` (relative to max(1, |b|)); returns the measured difference.
pub fn assert_close(what: &str, a: &Tensor, b: &Tensor, tol: f64) -> f64 {
    let d = max_rel_diff(a, b);
    assert!(
        d <= tol,
        "{what}: max diff {d:e} > {tol:e}\nrust = {a}\nref  = {b}"
    );
    d
}

/// Asserts two floats are within `tol`.
pub fn assert_near(what: &str, a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol, "{what}: {a} vs {b} (tol {tol})");
}
