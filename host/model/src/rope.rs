//! Rotary position embeddings, computed like `transformers` (fp32, rotate-half).

use serde_json::Value;
use tch::{Device, Kind, Tensor};

use crate::error::ModelError;

/// Supported `rope_scaling` variants.
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScaling {
    /// Plain RoPE (`rope_type: default`).
    Default,
    /// Llama 3.1 frequency-dependent scaling.
    Llama3 {
        /// `factor`.
        factor: f64,
        /// `low_freq_factor`.
        low_freq_factor: f64,
        /// `high_freq_factor`.
        high_freq_factor: f64,
        /// `original_max_position_embeddings`.
        original_max_position_embeddings: f64,
    },
}

impl RopeScaling {
    /// Parses the `rope_scaling` object of `config.json`.
    pub fn from_config(value: &Value) -> Result<Self, ModelError> {
        if value.is_null() {
            return Ok(RopeScaling::Default);
        }
        let kind = value
            .get("rope_type")
            .or_else(|| value.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("default");
        let num = |key: &str| {
            value.get(key).and_then(Value::as_f64).ok_or_else(|| {
                ModelError::Config(format!("rope_scaling.{key} is missing or not a number"))
            })
        };
        match kind {
            "default" => Ok(RopeScaling::Default),
            "llama3" => Ok(RopeScaling::Llama3 {
                factor: num("factor")?,
                low_freq_factor: num("low_freq_factor")?,
                high_freq_factor: num("high_freq_factor")?,
                original_max_position_embeddings: num("original_max_position_embeddings")?,
            }),
            other => Err(ModelError::Config(format!(
                "rope_scaling type `{other}` is not supported (supported: default, llama3)"
            ))),
        }
    }
}

/// Precomputed inverse frequencies; produces cos/sin for arbitrary positions.
#[derive(Debug)]
pub struct Rotary {
    inv_freq: Tensor,
}

impl Rotary {
    /// Builds the inverse frequencies `1 / theta^(2i/d)` on `device`.
    pub fn new(head_dim: i64, theta: f64, scaling: &RopeScaling, device: Device) -> Self {
        let exponents = Tensor::arange_start_step(0, head_dim, 2, (Kind::Int64, device))
            .to_kind(Kind::Float)
            / head_dim as f64;
        let base = Tensor::from(theta as f32).to_device(device);
        let inv_freq = base.pow(&exponents).reciprocal();
        let inv_freq = match scaling {
            RopeScaling::Default => inv_freq,
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings: old_len,
            } => {
                let low_wavelen = old_len / low_freq_factor;
                let high_wavelen = old_len / high_freq_factor;
                let wavelen = inv_freq.reciprocal() * (2.0 * std::f64::consts::PI);
                let scaled = inv_freq.where_self(&wavelen.le(low_wavelen), &(&inv_freq / *factor));
                let smooth = (wavelen.reciprocal() * *old_len - *low_freq_factor)
                    / (high_freq_factor - low_freq_factor);
                let smoothed =
                    (smooth.ones_like() - &smooth) * &scaled / *factor + &smooth * &scaled;
                let medium = wavelen
                    .ge(high_wavelen)
                    .logical_and(&wavelen.le(low_wavelen));
                smoothed.where_self(&medium, &scaled)
            }
        };
        Rotary { inv_freq }
    }

    /// `(cos, sin)` of shape `[B, T, head_dim]` in `kind` for integer `positions [B, T]`.
    pub fn cos_sin(&self, positions: &Tensor, kind: Kind) -> (Tensor, Tensor) {
        let pos = positions.to_kind(Kind::Float).unsqueeze(-1); // [B,T,1]
                                                                // The weights may have been moved after construction (var_store_mut).
        let inv_freq = self.inv_freq.to_device(positions.device());
        let freqs = pos * inv_freq.view([1, 1, -1]); // [B,T,d/2]
        let emb = Tensor::cat(&[&freqs, &freqs], -1);
        (emb.cos().to_kind(kind), emb.sin().to_kind(kind))
    }
}

/// Applies rotate-half RoPE to `x [B, H, T, D]` with `cos/sin [B, T, D]`.
pub fn apply_rotary(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
    let cos = cos.unsqueeze(1);
    let sin = sin.unsqueeze(1);
    let half = x.size()[3] / 2;
    let x1 = x.narrow(3, 0, half);
    let x2 = x.narrow(3, half, half);
    let rotated = Tensor::cat(&[&(-x2), &x1], 3);
    x * cos + rotated * sin
}
