/* C ABI over libtorch operations that tch does not bind.
 *
 * Every function returns 0 on success. On failure it returns 1 and stores a
 * NUL-terminated message, allocated with malloc, in *err (when err is not
 * NULL); the caller frees it with skyrl_torch_ops_free. No C++ exception ever
 * leaves these functions.
 *
 * Tensors are passed as `at::Tensor*` (what tch's `Tensor::as_ptr` returns).
 * Returned tensors are `new at::Tensor`, owned by the caller (tch's
 * `Tensor::from_ptr` takes them over and frees them with `delete`).
 */
#ifndef SKYRL_TORCH_OPS_H
#define SKYRL_TORCH_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Frees a message allocated by the shim. NULL is fine. */
void skyrl_torch_ops_free(void* ptr);

/* torch._fused_adamw_ over n parameters (all on one device, one dtype, the
 * grads and moments alike), at update number `step` (1-based, already
 * counted), without amsgrad, maximize or grad scaling. */
int skyrl_fused_adamw(void* const* params, const void* const* grads,
                      void* const* exp_avgs, void* const* exp_avg_sqs, size_t n,
                      double step, double lr, double beta1, double beta2,
                      double weight_decay, double eps, char** err);

/* The L2 norm of each of n tensors (torch._foreach_norm, computed in fp32)
 * as one 1-D fp32 tensor of n elements, in *out. */
int skyrl_foreach_norm(const void* const* tensors, size_t n, void** out, char** err);

/* torch._foreach_mul_(tensors, scalar). */
int skyrl_foreach_mul_scalar(void* const* tensors, size_t n, double scalar, char** err);

/* Next-token log-probs of hidden states through the LM head, chunk by chunk:
 * hidden [N, H], weight [V, H], targets [N] int64. For chunks of `chunk`
 * rows, logits = (hidden_chunk @ weight^T) in fp32 / temperature, then
 * log-prob of the target = logit - logsumexp and, when with_entropy != 0,
 * the entropy of the softmax. *logprobs: [N] fp32; *entropy: [N] fp32 or
 * NULL. Differentiable in hidden and weight: the backward recomputes each
 * chunk's logits instead of keeping them; with keep != 0, all N rows are one
 * chunk whose [N, V] fp32 log-softmax is kept for the backward instead. */
int skyrl_chunked_logprobs(const void* hidden, const void* weight, const void* targets,
                           double temperature, int64_t chunk, int with_entropy, int keep,
                           void** logprobs, void** entropy, char** err);

/* Attention of one query position per row (decode), CPU fp32 only:
 * q [B, Hkv, G, D] (the G query heads sharing each key/value head), keys and
 * values [B, Hkv, S, D] with the same strides and D contiguous, an additive
 * mask [B, S] (-inf: masked, skipped). *out: [B, Hkv, G, D] fp32, the
 * softmax(q k^T * scale + mask) v of each query head. */
int skyrl_decode_attention(const void* q, const void* k, const void* v, const void* mask,
                           double scale, void** out, char** err);

#ifdef __cplusplus
}
#endif

#endif
