//! Building blocks of the decoder: RMSNorm, SwiGLU MLP, grouped-query attention.

use std::sync::atomic::{AtomicBool, Ordering};

use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use crate::config::ModelConfig;
use crate::kv_cache::LayerKv;
use crate::lora::{LinearSite, LoraAdapter};
use crate::rope::apply_rotary;

/// Which keys each query of an attention call may see.
#[derive(Debug)]
pub enum AttnMask {
    /// Plain causal attention over `T` queries and the same `T` keys: no
    /// padding and no cached prefix. SDPA runs with `is_causal` and no mask.
    Causal,
    /// Additive `[B, 1, T, S]` (0 = attend, a large negative = masked), `S` =
    /// cached + `T` keys; build it with [`AttnMask::from_bool`], once per forward.
    /// A query that may see no key gets the mean of all values (as in
    /// `transformers`' eager attention).
    Additive(Tensor),
}

impl AttnMask {
    /// The mask for a boolean `allowed [B, 1, T, S]` (true = attend), in `kind`.
    /// SDPA turns a boolean mask into this additive one on every call (and keeps
    /// that copy for the backward), so converting once serves all layers.
    pub fn from_bool(allowed: &Tensor, kind: Kind) -> Self {
        let additive = Tensor::zeros(allowed.size(), (kind, allowed.device()))
            .masked_fill(&allowed.logical_not(), mask_value(kind));
        AttnMask::Additive(additive)
    }

    /// A shallow copy sharing the mask tensor.
    pub fn shallow_clone(&self) -> Self {
        match self {
            AttnMask::Causal => AttnMask::Causal,
            AttnMask::Additive(m) => AttnMask::Additive(m.shallow_clone()),
        }
    }
}

/// Large negative value used for masked attention scores in `kind` (finite, so a
/// query that may see no key averages all values instead of producing NaN).
fn mask_value(kind: Kind) -> f64 {
    match kind {
        Kind::Half => -65504.0,
        Kind::BFloat16 => -3.38e38,
        _ => f32::MIN as f64,
    }
}

/// How a new model's weight matrices and biases start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamInit {
    /// HF-style: weights normal(0, 0.02), biases 0, each weight drawn from
    /// its own stream of this seed ([`crate::seeded_init`]).
    Seeded(u64),
    /// Uninitialised memory, for weights that are loaded right after.
    Empty,
}

impl ParamInit {
    /// A trainable variable `name [dims]` under `p`: normal(0, 0.02) or uninitialised.
    pub(crate) fn weight(self, p: &nn::Path, name: &str, dims: &[i64]) -> Tensor {
        match self {
            ParamInit::Seeded(seed) => {
                let values = crate::seeded_init::normal_tensor(seed, &p.path(name), dims, 0.02);
                let values = values.to_kind(p.kind()).to_device(p.device());
                p.add(name, values, true)
            }
            ParamInit::Empty => Self::empty(p, name, dims),
        }
    }

    /// A trainable variable `name [dims]` under `p`: zeros or uninitialised.
    fn bias(self, p: &nn::Path, name: &str, dims: &[i64]) -> Tensor {
        match self {
            ParamInit::Seeded(_) => p.zeros(name, dims),
            ParamInit::Empty => Self::empty(p, name, dims),
        }
    }

    fn empty(p: &nn::Path, name: &str, dims: &[i64]) -> Tensor {
        p.add(name, Tensor::empty(dims, (p.kind(), p.device())), true)
    }
}

/// Root-mean-square layer norm computed in fp32 (as in `transformers`).
#[derive(Debug)]
pub struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    /// Creates `weight [dim]` (initialised to ones) under `p`.
    pub fn new(p: nn::Path, dim: i64, eps: f64) -> Self {
        let weight = p.var("weight", &[dim], nn::Init::Const(1.0));
        RmsNorm { weight, eps }
    }
}

impl Module for RmsNorm {
    fn forward(&self, x: &Tensor) -> Tensor {
        let kind = x.kind();
        let h = x.to_kind(Kind::Float);
        let variance = h.pow_tensor_scalar(2).mean_dim(-1, true, Kind::Float);
        let h = h * (variance + self.eps).rsqrt();
        &self.weight * h.to_kind(kind)
    }
}

/// A linear layer with HF-style init, optionally adapted by LoRA.
#[derive(Debug)]
pub struct Projection {
    linear: nn::Linear,
    lora: Option<LoraAdapter>,
}

impl Projection {
    fn new(p: nn::Path, input: i64, output: i64, bias: bool, init: ParamInit) -> Self {
        let linear = nn::Linear {
            ws: init.weight(&p, "weight", &[output, input]),
            bs: bias.then(|| init.bias(&p, "bias", &[output])),
        };
        Projection { linear, lora: None }
    }

    /// The weight `[out, in]`.
    pub fn weight(&self) -> &Tensor {
        &self.linear.ws
    }

    /// The adapter, when LoRA adapts this layer.
    pub fn lora(&self) -> Option<&LoraAdapter> {
        self.lora.as_ref()
    }

    fn site(&mut self, name: String) -> LinearSite<'_> {
        let size = self.linear.ws.size();
        LinearSite {
            name,
            in_features: size[1],
            out_features: size[0],
            slot: &mut self.lora,
        }
    }
}

impl Module for Projection {
    fn forward(&self, x: &Tensor) -> Tensor {
        let y = self.linear.forward(x);
        match &self.lora {
            Some(lora) => y + lora.delta(x),
            None => y,
        }
    }
}

/// `down(silu(gate(x)) * up(x))`.
#[derive(Debug)]
pub struct Mlp {
    gate_proj: Projection,
    up_proj: Projection,
    down_proj: Projection,
}

impl Mlp {
    /// Creates the three projections under `p`.
    pub fn new(p: nn::Path, config: &ModelConfig, init: ParamInit) -> Self {
        let (h, i) = (config.hidden_size, config.intermediate_size);
        let bias = config.mlp_bias.unwrap_or(false);
        Mlp {
            gate_proj: Projection::new(&p / "gate_proj", h, i, bias, init),
            up_proj: Projection::new(&p / "up_proj", h, i, bias, init),
            down_proj: Projection::new(&p / "down_proj", i, h, bias, init),
        }
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        let gate = self.gate_proj.forward(x).silu();
        self.down_proj.forward(&(gate * self.up_proj.forward(x)))
    }
}

/// Whether decode steps on CPU in fp32 attend through SDPA instead of
/// [`skyrl_torch_ops::decode_attention`] (for benchmarks that compare them).
static SDPA_FOR_DECODE: AtomicBool = AtomicBool::new(false);

/// Makes every later decode step of this process attend through SDPA (`true`)
/// or, on CPU in fp32, through the one-pass decode kernel (`false`, the
/// default). The rollout benchmark's `--decode-attention sdpa` sets it.
pub fn set_sdpa_for_decode(yes: bool) {
    SDPA_FOR_DECODE.store(yes, Ordering::Relaxed);
}

/// Multi-head attention with grouped key/value heads and rotary embeddings.
#[derive(Debug)]
pub struct Attention {
    q_proj: Projection,
    k_proj: Projection,
    v_proj: Projection,
    o_proj: Projection,
    q_norm: Option<RmsNorm>,
    k_norm: Option<RmsNorm>,
    num_heads: i64,
    num_kv_heads: i64,
    head_dim: i64,
}

impl Attention {
    /// Creates the projections (and Qwen3 q/k norms) under `p`.
    pub fn new(p: nn::Path, config: &ModelConfig, init: ParamInit) -> Self {
        let h = config.hidden_size;
        let (nh, nkv, hd) = (
            config.num_attention_heads,
            config.kv_heads(),
            config.head_dim(),
        );
        let qkv_bias = config.qkv_bias();
        let (q_norm, k_norm) = if config.qk_norm() {
            (
                Some(RmsNorm::new(&p / "q_norm", hd, config.rms_norm_eps)),
                Some(RmsNorm::new(&p / "k_norm", hd, config.rms_norm_eps)),
            )
        } else {
            (None, None)
        };
        Attention {
            q_proj: Projection::new(&p / "q_proj", h, nh * hd, qkv_bias, init),
            k_proj: Projection::new(&p / "k_proj", h, nkv * hd, qkv_bias, init),
            v_proj: Projection::new(&p / "v_proj", h, nkv * hd, qkv_bias, init),
            o_proj: Projection::new(&p / "o_proj", nh * hd, h, config.o_bias(), init),
            q_norm,
            k_norm,
            num_heads: nh,
            num_kv_heads: nkv,
            head_dim: hd,
        }
    }

    /// `x [B, T, H]`, `cos/sin [B, T, D]`, `mask` over `S` keys (cached + new).
    /// With `cache`, new keys/values are appended to it. Grouped-query heads
    /// share their kv head without copies (SDPA's `enable_gqa`).
    pub fn forward(
        &self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        mask: &AttnMask,
        cache: Option<&mut dyn LayerKv>,
    ) -> Tensor {
        let (b, t) = (x.size()[0], x.size()[1]);
        let heads = |proj: &Projection, n: i64, norm: &Option<RmsNorm>| {
            let y = proj.forward(x).view([b, t, n, self.head_dim]);
            let y = match norm {
                Some(norm) => norm.forward(&y),
                None => y,
            };
            y.transpose(1, 2)
        };
        let q = heads(&self.q_proj, self.num_heads, &self.q_norm);
        let k = heads(&self.k_proj, self.num_kv_heads, &self.k_norm);
        let v = heads(&self.v_proj, self.num_kv_heads, &None);
        let q = apply_rotary(&q, cos, sin);
        let k = apply_rotary(&k, cos, sin);
        let (k, v) = match cache {
            Some(cache) => cache.append(&k, &v),
            None => (k, v),
        };
        let groups = self.num_heads / self.num_kv_heads;
        let scale = (self.head_dim as f64).powf(-0.5);
        let sdpa = |q: &Tensor, mask: Option<&Tensor>, causal: bool, gqa: bool| {
            Tensor::scaled_dot_product_attention(q, &k, &v, mask, 0.0, causal, scale, gqa)
        };
        let out = match mask {
            AttnMask::Additive(mask) if t == 1 => {
                // Decoding: the query heads sharing a kv head become that head's
                // query rows. fp32 on CPU reads the keys and values once (SDPA
                // copies them for BLAS first).
                let q = q.reshape([b, self.num_kv_heads, groups, self.head_dim]);
                let s = mask.size()[3];
                let keys_mask = mask.expand([b, 1, 1, s], false).view([b, s]);
                let out = if !SDPA_FOR_DECODE.load(Ordering::Relaxed)
                    && skyrl_torch_ops::decode_attention_applies(&q, &k, &v, &keys_mask)
                {
                    skyrl_torch_ops::decode_attention(&q, &k, &v, &keys_mask, scale)
                        .expect("operands checked")
                } else {
                    // Faster than `enable_gqa` for one query.
                    let mask = mask.expand([b, 1, groups, s], false);
                    sdpa(&q, Some(&mask), false, false)
                };
                out.reshape([b, self.num_heads, 1, self.head_dim])
            }
            AttnMask::Additive(mask) => sdpa(&q, Some(mask), false, groups > 1),
            AttnMask::Causal => sdpa(&q, None, true, groups > 1),
        };
        let out = out
            .transpose(1, 2)
            .contiguous()
            .view([b, t, self.num_heads * self.head_dim]);
        self.o_proj.forward(&out)
    }
}

/// Pre-norm decoder block: attention then MLP, both residual.
#[derive(Debug)]
pub struct DecoderLayer {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
}

impl DecoderLayer {
    /// Creates the block under `p` (HF names).
    pub fn new(p: nn::Path, config: &ModelConfig, init: ParamInit) -> Self {
        let (h, eps) = (config.hidden_size, config.rms_norm_eps);
        DecoderLayer {
            input_layernorm: RmsNorm::new(&p / "input_layernorm", h, eps),
            self_attn: Attention::new(&p / "self_attn", config, init),
            post_attention_layernorm: RmsNorm::new(&p / "post_attention_layernorm", h, eps),
            mlp: Mlp::new(&p / "mlp", config, init),
        }
    }

    /// The linear layers LoRA may adapt, named under `prefix`
    /// (`model.layers.<i>`) as in the Hugging Face model.
    pub fn linear_sites(&mut self, prefix: &str) -> Vec<LinearSite<'_>> {
        let a = &mut self.self_attn;
        let m = &mut self.mlp;
        vec![
            a.q_proj.site(format!("{prefix}.self_attn.q_proj")),
            a.k_proj.site(format!("{prefix}.self_attn.k_proj")),
            a.v_proj.site(format!("{prefix}.self_attn.v_proj")),
            a.o_proj.site(format!("{prefix}.self_attn.o_proj")),
            m.gate_proj.site(format!("{prefix}.mlp.gate_proj")),
            m.up_proj.site(format!("{prefix}.mlp.up_proj")),
            m.down_proj.site(format!("{prefix}.mlp.down_proj")),
        ]
    }

    /// `(module name, projection)` of the linear layers, as [`DecoderLayer::linear_sites`] names them.
    pub fn projections(&self, prefix: &str) -> Vec<(String, &Projection)> {
        let (a, m) = (&self.self_attn, &self.mlp);
        vec![
            (format!("{prefix}.self_attn.q_proj"), &a.q_proj),
            (format!("{prefix}.self_attn.k_proj"), &a.k_proj),
            (format!("{prefix}.self_attn.v_proj"), &a.v_proj),
            (format!("{prefix}.self_attn.o_proj"), &a.o_proj),
            (format!("{prefix}.mlp.gate_proj"), &m.gate_proj),
            (format!("{prefix}.mlp.up_proj"), &m.up_proj),
            (format!("{prefix}.mlp.down_proj"), &m.down_proj),
        ]
    }

    /// See [`Attention::forward`] for shapes.
    pub fn forward(
        &self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        mask: &AttnMask,
        cache: Option<&mut dyn LayerKv>,
    ) -> Tensor {
        let h = x + self
            .self_attn
            .forward(&self.input_layernorm.forward(x), cos, sin, mask, cache);
        let out = self.mlp.forward(&self.post_attention_layernorm.forward(&h));
        h + out
    }
}
