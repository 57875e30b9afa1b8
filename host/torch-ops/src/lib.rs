//! libtorch operations that tch 0.26 does not bind, through a small C++ shim
//! (`shim/torch_ops.cpp`):
//!
//! * [`fused_adamw_`]: `torch._fused_adamw_`, one AdamW update of many
//!   tensors in one pass over each (CPU and CUDA kernels);
//! * [`foreach_norm`] and [`foreach_mul_`]: `torch._foreach_norm` and
//!   `torch._foreach_mul_`, for gradient clipping;
//! * [`chunked_logprobs`]: next-token log-probs (and entropy) of hidden
//!   states through the LM head, a chunk of rows at a time, as an autograd
//!   Function whose backward recomputes each chunk's logits, so full
//!   `[tokens, vocab]` logits never exist;
//! * [`decode_attention`]: attention of one query per row on CPU in fp32,
//!   reading each key and value once (SDPA's BLAS path copies them first).

mod decode_attention;
mod ffi;
mod logprobs;
mod multi_tensor;

pub use decode_attention::{decode_attention, decode_attention_applies};
pub use logprobs::{chunked_logprobs, ChunkedLogprobs, HeadChunking};
pub use multi_tensor::{foreach_mul_, foreach_norm, fused_adamw_, AdamWStep};

/// A failure inside libtorch (its message) or an argument the shim refuses.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TorchOpsError(pub String);

/// Result of this crate's operations.
pub type Result<T, E = TorchOpsError> = std::result::Result<T, E>;
