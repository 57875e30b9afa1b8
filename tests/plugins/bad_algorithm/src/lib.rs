//! An algorithm plugin that misbehaves as `options.mode` says, to test that
//! the host stops the step with an error naming the plugin:
//! `trap`, `loop`, `wrong_shape`, `nan`, `error`, or `good` (a zero
//! advantage / a REINFORCE-style loss `-A * logp`). With `options.fail_after: N`
//! the first N calls of an instance behave as `good` and later ones as `mode`.

use std::sync::atomic::{AtomicU64, Ordering};

use skyrl_sdk::{
    AdvantageEstimator, AdvantageInput, AdvantageOutput, Error, LossInput, LossOutput, Matrix,
    PolicyLoss, Result,
};

static CALLS: AtomicU64 = AtomicU64::new(0);

/// The misbehaviour due on this call (None: behave).
fn mode(config: &serde_json::Value) -> Option<String> {
    let options = config.get("options")?;
    let mode = options.get("mode")?.as_str()?.to_string();
    let calls = CALLS.fetch_add(1, Ordering::SeqCst);
    let good_calls = options
        .get("fail_after")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    (calls >= good_calls && mode != "good").then_some(mode)
}

fn misbehave(mode: &str, rows: usize, cols: usize) -> Result<Matrix> {
    match mode {
        "trap" => panic!("bad_algorithm: asked to trap"),
        "loop" => {
            let mut x = 0u64;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        "wrong_shape" => Ok(Matrix::zeros(rows, cols + 1)),
        "nan" => {
            let mut m = Matrix::zeros(rows, cols);
            m.data[0] = f32::NAN;
            Ok(m)
        }
        "error" => Err(Error::failed("bad_algorithm: asked to fail")),
        other => Err(Error::config(format!("unknown mode {other}"))),
    }
}

pub struct Bad;

impl AdvantageEstimator for Bad {
    fn compute(input: &AdvantageInput) -> Result<AdvantageOutput> {
        let (rows, cols) = (input.token_rewards.nrows(), input.token_rewards.ncols());
        let advantages = match mode(&input.config) {
            Some(m) => misbehave(&m, rows, cols)?,
            None => Matrix::zeros(rows, cols),
        };
        Ok(AdvantageOutput {
            returns: advantages.clone(),
            advantages,
        })
    }
}

impl PolicyLoss for Bad {
    fn compute(input: &LossInput) -> Result<LossOutput> {
        let (rows, cols) = (input.log_probs.nrows(), input.log_probs.ncols());
        if let Some(m) = mode(&input.config) {
            let grad = misbehave(&m, rows, cols)?;
            return Ok(LossOutput {
                loss: 0.0,
                grad,
                metrics: Vec::new(),
            });
        }
        let mut grad = Matrix::zeros(rows, cols);
        let mut loss = 0.0;
        for (i, g) in grad.data.iter_mut().enumerate() {
            let (a, m) = (input.advantages.data[i], input.loss_mask.data[i]);
            loss -= (m * a * input.log_probs.data[i]) as f64;
            *g = -m * a;
        }
        Ok(LossOutput {
            loss,
            grad,
            metrics: Vec::new(),
        })
    }
}

skyrl_sdk::export_algorithm!(
    name = "bad_algorithm",
    version = "0.1.0",
    description = "Misbehaves on request (tests).",
    advantage = Bad,
    policy_loss = Bad,
);
