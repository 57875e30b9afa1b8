//! Activation checkpointing per decoder layer (`trainer.gradient_checkpointing`).
//!
//! The forward runs the decoder layers without building a graph and keeps only
//! each layer's input. The returned logprobs hang off a leaf that stands for
//! the last layer's output, so `loss.backward()` reaches only the final norm
//! and the head (the chunked head of [`crate::chunked_logprobs`], which keeps
//! no full logits either). [`LayerCheckpoints::backward`] then walks the layers in
//! reverse: it recomputes one layer with a graph from its saved input,
//! back-propagates the gradient that arrived at its output, and hands the
//! gradient at its input to the layer below, down to the embedding. Weight
//! gradients accumulate as in a plain backward; at most one layer's
//! activations are alive at a time. The recomputation is exact as long as
//! nothing is random: LoRA dropout must be off (the trainer refuses both).

use tch::nn::Module;
use tch::Tensor;

use crate::error::Result;
use crate::layers::AttnMask;
use crate::model::{check_logprob_input, CausalLm, LogprobOptions, TokenLogprobs};

/// What a checkpointed forward keeps for its backward.
pub struct LayerCheckpoints<'m> {
    model: &'m CausalLm,
    ids: Tensor,
    cos: Tensor,
    sin: Tensor,
    mask: AttnMask,
    /// Input of every decoder layer (detached).
    inputs: Vec<Tensor>,
    /// Leaf standing for the last layer's output; its gradient seeds the walk.
    last: Tensor,
}

impl CausalLm {
    /// [`CausalLm::forward_logprobs_chunked`] with per-layer recomputation: after
    /// back-propagating a loss of the returned logprobs, call
    /// [`LayerCheckpoints::backward`] to finish the backward through the layers.
    pub fn forward_logprobs_checkpointed(
        &self,
        input_ids: &Tensor,
        attention_mask: &Tensor,
        options: &LogprobOptions,
    ) -> Result<(TokenLogprobs, LayerCheckpoints<'_>)> {
        check_logprob_input(input_ids, options)?;
        let (ids, positions, mask) = self.full_inputs(input_ids, Some(attention_mask))?;
        let (inputs, last, cos, sin) = {
            let _g = tch::no_grad_guard();
            let mut h = Tensor::embedding(&self.embed_tokens, &ids, -1, false, false);
            let (cos, sin) = self.rotary.cos_sin(&positions, h.kind());
            let mut inputs = Vec::with_capacity(self.layers.len());
            for layer in &self.layers {
                let next = layer.forward(&h, &cos, &sin, &mask, None);
                inputs.push(h);
                h = next;
            }
            (inputs, h, cos, sin)
        };
        let last = last.detach().set_requires_grad(true);
        let out = self.logprobs_of_hidden(&self.norm.forward(&last), &ids, options, None)?;
        let checkpoints = LayerCheckpoints {
            model: self,
            ids,
            cos,
            sin,
            mask,
            inputs,
            last,
        };
        Ok((out, checkpoints))
    }
}

impl LayerCheckpoints<'_> {
    /// Back-propagates through the decoder layers and the embedding, after
    /// the loss has been back-propagated to the head. Does nothing when the
    /// loss did not depend on the layers.
    pub fn backward(self) -> Result<()> {
        let mut grad = self.last.grad();
        if !grad.defined() {
            return Ok(());
        }
        let model = self.model;
        for (layer, input) in model.layers.iter().zip(self.inputs).rev() {
            let x = input.detach().set_requires_grad(true);
            let y = layer.forward(&x, &self.cos, &self.sin, &self.mask, None);
            (y * &grad).sum(y_kind(&grad)).backward();
            grad = x.grad();
            if !grad.defined() {
                return Ok(());
            }
        }
        if model.embed_tokens.requires_grad() {
            // Frozen (LoRA) embeddings take no gradient.
            let embedded = Tensor::embedding(&model.embed_tokens, &self.ids, -1, false, false);
            (embedded * &grad).sum(y_kind(&grad)).backward();
        }
        Ok(())
    }
}

/// Sums in fp32 at least, so a bf16 model's seed sum does not round.
fn y_kind(grad: &Tensor) -> tch::Kind {
    match grad.kind() {
        tch::Kind::Double => tch::Kind::Double,
        _ => tch::Kind::Float,
    }
}
