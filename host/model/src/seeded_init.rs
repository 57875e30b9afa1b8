//! Reproducible random init from a seed and a parameter's name.
//!
//! libtorch's global generator is shared by every thread of the process, so a
//! model initialised after `tch::manual_seed` changes whenever another thread
//! draws from it in between (parallel tests, a trainer beside an engine). Here
//! each parameter draws from its own ChaCha8 stream, keyed by the seed and the
//! parameter's full name: the same seed gives the same model in any process,
//! in any order of construction.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tch::Tensor;

/// The generator for parameter `name` of a model seeded with `seed`.
pub fn named_rng(seed: u64, name: &str) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(fnv1a(name.as_bytes()));
    rng
}

/// `n` draws from normal(0, `std`), by Box-Muller (both values of each pair).
pub fn normal_values(rng: &mut ChaCha8Rng, n: usize, std: f64) -> Vec<f32> {
    let mut out = Vec::with_capacity(n + 1);
    while out.len() < n {
        let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
        let r = (-2.0 * u1.ln()).sqrt() * std;
        let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
        out.push((r * c) as f32);
        out.push((r * s) as f32);
    }
    out.truncate(n);
    out
}

/// A CPU fp32 tensor `dims` drawn from normal(0, `std`) for parameter `name`.
pub fn normal_tensor(seed: u64, name: &str, dims: &[i64], std: f64) -> Tensor {
    let n = dims.iter().product::<i64>().max(0) as usize;
    let values = normal_values(&mut named_rng(seed, name), n, std);
    Tensor::from_slice(&values).view(dims)
}

/// FNV-1a: a hash that stays the same across Rust releases (unlike `DefaultHasher`).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_depend_on_seed_and_name_only() {
        let a = normal_tensor(7, "model.layers.0.mlp.up_proj.weight", &[64, 32], 0.02);
        let b = normal_tensor(7, "model.layers.0.mlp.up_proj.weight", &[64, 32], 0.02);
        let c = normal_tensor(7, "model.layers.1.mlp.up_proj.weight", &[64, 32], 0.02);
        let d = normal_tensor(8, "model.layers.0.mlp.up_proj.weight", &[64, 32], 0.02);
        assert!(a.equal(&b));
        assert!(!a.equal(&c) && !a.equal(&d));
    }

    #[test]
    fn draws_have_the_asked_moments() {
        let t = normal_tensor(1, "w", &[200_000], 0.02);
        let mean = t.mean(tch::Kind::Double).double_value(&[]);
        let std = t.std(true).double_value(&[]);
        assert!(mean.abs() < 2e-4, "mean {mean}");
        assert!((std - 0.02).abs() < 2e-4, "std {std}");
        // Odd lengths keep the first value of the last pair.
        assert_eq!(normal_tensor(1, "w", &[5], 0.02).size(), vec![5]);
    }
}
