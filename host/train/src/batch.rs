//! A generated batch as padded training tensors, in skyrl's layout: prompts
//! left-padded to a common width, responses right-padded after them.

use skyrl_model::{CausalLm, Tokenizer};
use skyrl_rollout::GeneratorOutput;
use tch::{Device, Tensor};

/// Padded tensors of one generated batch (rows = trajectories).
pub struct TrainingBatch {
    /// `[N, P + R]` prompt then response token ids.
    pub input_ids: Tensor,
    /// `[N, P + R]` 1 on real tokens.
    pub attention_mask: Tensor,
    /// Prompt width `P` (responses start at this column).
    pub prompt_len: i64,
    /// `[N, R]` 1 on tokens the loss covers (generated, not observations).
    pub response_mask: Tensor,
    /// `[N, R]` the reward of each turn on its last token.
    pub token_rewards: Tensor,
    /// `[N, R]` logprobs the engine sampled with.
    pub rollout_logprobs: Tensor,
}

/// The padding token: the tokenizer's, else the model config's, else 0.
pub fn pad_id(tokenizer: &Tokenizer, model: &CausalLm) -> i64 {
    tokenizer
        .pad_token_id()
        .or(model.config().pad_token_id)
        .unwrap_or(0)
}

impl TrainingBatch {
    /// Left-pads prompts and right-pads responses of `out` with `pad`.
    pub fn from_output(out: &GeneratorOutput, pad: i64, device: Device) -> Self {
        let n = out.prompt_token_ids.len();
        let width = |v: &[Vec<i64>]| v.iter().map(Vec::len).max().unwrap_or(1).max(1);
        let p = width(&out.prompt_token_ids);
        let r = width(&out.response_ids);
        let mut ids = Vec::with_capacity(n * (p + r));
        let mut attn = Vec::with_capacity(n * (p + r));
        let mut mask = Vec::with_capacity(n * r);
        let mut rew = Vec::with_capacity(n * r);
        let mut lps = Vec::with_capacity(n * r);
        for i in 0..n {
            let prompt = &out.prompt_token_ids[i];
            let resp = &out.response_ids[i];
            ids.extend(std::iter::repeat_n(pad, p - prompt.len()));
            attn.extend(std::iter::repeat_n(0i64, p - prompt.len()));
            ids.extend_from_slice(prompt);
            attn.extend(std::iter::repeat_n(1i64, prompt.len()));
            ids.extend_from_slice(resp);
            attn.extend(std::iter::repeat_n(1i64, resp.len()));
            ids.extend(std::iter::repeat_n(pad, r - resp.len()));
            attn.extend(std::iter::repeat_n(0i64, r - resp.len()));
            let fill = r - resp.len();
            mask.extend_from_slice(&out.loss_masks[i]);
            mask.extend(std::iter::repeat_n(0f32, fill));
            rew.extend_from_slice(&out.rewards[i]);
            rew.extend(std::iter::repeat_n(0f32, fill));
            lps.extend_from_slice(&out.rollout_logprobs[i]);
            lps.extend(std::iter::repeat_n(0f32, fill));
        }
        let (n, p, r) = (n as i64, p as i64, r as i64);
        let t = |v: &[f32]| Tensor::from_slice(v).view([n, r]).to_device(device);
        Self {
            input_ids: Tensor::from_slice(&ids).view([n, p + r]).to_device(device),
            attention_mask: Tensor::from_slice(&attn).view([n, p + r]).to_device(device),
            prompt_len: p,
            response_mask: t(&mask),
            token_rewards: t(&rew),
            rollout_logprobs: t(&lps),
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> i64 {
        self.input_ids.size()[0]
    }

    /// Response width `R`.
    pub fn response_len(&self) -> i64 {
        self.response_mask.size()[1]
    }
}
