//! What the skyrl-train benches share: the AdamW settings of the optimizer
//! benches, command-line flags and medians.
#![allow(dead_code)]

use skyrl_train::optim::AdamWParams;

/// The AdamW hyper-parameters the optimizer benches use on both sides
/// (torch's scripts use the same).
pub const HP: AdamWParams = AdamWParams {
    lr: 1e-5,
    beta1: 0.9,
    beta2: 0.999,
    eps: 1e-8,
    weight_decay: 0.01,
};

/// Gradient clipping norm of the optimizer benches.
pub const MAX_NORM: f64 = 1.0;

/// The value after `--flag` on the command line, if given.
pub fn flag(argv: &[String], name: &str) -> Option<String> {
    argv.iter()
        .position(|x| x == name)
        .and_then(|i| argv.get(i + 1))
        .cloned()
}

/// `--flag N` as a number, if given.
pub fn number_flag(argv: &[String], name: &str) -> Option<i64> {
    flag(argv, name).map(|v| v.parse().expect("a number"))
}

/// The median of `values` (the upper one of an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
