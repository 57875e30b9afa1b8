//! Inputs of the algorithm parity tests.

use tch::{Kind, Tensor};

pub const B: i64 = 12;
pub const T: i64 = 7;

/// Seeded random tensors shared by the algorithm parity tests.
pub struct Inputs {
    pub mask: Tensor,
    pub rewards: Tensor,
    pub uids: Vec<String>,
    pub values: Tensor,
    pub old_values: Tensor,
    pub returns: Tensor,
    pub log_probs: Tensor,
    pub old_log_probs: Tensor,
    pub advantages: Tensor,
    pub rollout: Tensor,
    pub ref_lp: Tensor,
    pub logits: Tensor,
}

/// The parity inputs: 12 rows of 7 tokens in groups a(4) b(4, equal rewards) c(3) d(1).
pub fn inputs() -> Inputs {
    tch::manual_seed(1234);
    let lens = Tensor::randint_low(2, T + 1, [B, 1], (Kind::Int64, tch::Device::Cpu));
    let pos = Tensor::arange(T, (Kind::Int64, tch::Device::Cpu)).unsqueeze(0);
    let mask = pos.lt_tensor(&lens).to_kind(Kind::Float);
    // groups a(4) b(4, all equal rewards) c(3) d(1)
    let uids: Vec<String> = ["a", "a", "a", "a", "b", "b", "b", "b", "c", "c", "c", "d"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let scores = Tensor::rand([B], (Kind::Float, tch::Device::Cpu));
    let _ = scores.narrow(0, 4, 4).fill_(0.75);
    let last = (&lens - 1).squeeze_dim(-1);
    let rewards = Tensor::zeros([B, T], (Kind::Float, tch::Device::Cpu)).scatter(
        1,
        &last.unsqueeze(-1),
        &scores.unsqueeze(-1),
    );
    let values = Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu)) * 0.5;
    let old_values = &values + Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu)) * 0.3;
    let returns = Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu));
    let log_probs = Tensor::rand([B, T], (Kind::Float, tch::Device::Cpu)) * -2.0 - 0.05;
    let old_log_probs = &log_probs + Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu)) * 0.3;
    let advantages = Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu));
    let rollout = &old_log_probs + Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu)) * 0.2;
    let ref_lp = &log_probs + Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu)) * 0.1;
    let logits = Tensor::randn([B, T, 11], (Kind::Float, tch::Device::Cpu)) * 2.0;
    Inputs {
        mask,
        rewards,
        uids,
        values,
        old_values,
        returns,
        log_probs,
        old_log_probs,
        advantages,
        rollout,
        ref_lp,
        logits,
    }
}
