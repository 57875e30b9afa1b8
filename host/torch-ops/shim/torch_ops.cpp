// libtorch operations tch does not bind: fused AdamW, multi-tensor norm and
// scaling, and a chunked LM-head log-prob autograd Function. See
// torch_ops.h for the C contract; the Rust side (src/) owns the checks.
#include "torch_ops.h"
#include "shim_common.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using skyrl_shim::give;
using skyrl_shim::guard;
using skyrl_shim::tensor_ref;
using skyrl_shim::tensors;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Logits of rows [start, start + len) in fp32, divided by the temperature.
at::Tensor chunk_logits(const at::Tensor& hidden, const at::Tensor& weight, int64_t start,
                        int64_t len, double temperature) {
  at::Tensor z = at::matmul(hidden.narrow(0, start, len), weight.t());
  if (z.scalar_type() != at::kFloat) {
    z = z.to(at::kFloat);
  }
  if (temperature != 1.0) {
    z.div_(temperature);
  }
  return z;
}

// Entropy -sum(p * logp) of rows of log-probs [c, V] -> [c], the sum as a
// batched dot product (no [c, V] product temporary).
at::Tensor entropy_of(const at::Tensor& logp) {
  return at::bmm(logp.exp().unsqueeze(1), logp.unsqueeze(2)).view({-1}).neg_();
}

// log p(target) (and entropy) per row, over chunks of rows of the LM head.
// Keeps hidden, the weight (both alive anyway), the targets and the per-row
// logsumexp for the backward, which recomputes each chunk's logits; or, with
// keep (one chunk of all rows), the [N, V] log-softmax itself, so that the
// backward skips the recomputing matmul (for when [N, V] is cheap to hold).
struct ChunkedLogprobs : public torch::autograd::Function<ChunkedLogprobs> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& hidden,
                               const at::Tensor& weight, const at::Tensor& targets,
                               double temperature, int64_t chunk, bool with_entropy, bool keep) {
    const int64_t n = hidden.size(0);
    if (keep) {
      chunk = std::max<int64_t>(n, 1);
    }
    const auto f32 = hidden.options().dtype(at::kFloat);
    at::Tensor lse = at::empty({n}, f32);
    at::Tensor logprobs = at::empty({n}, f32);
    at::Tensor entropy = with_entropy ? at::empty({n}, f32) : at::Tensor();
    at::Tensor kept;
    for (int64_t s = 0; s < n; s += chunk) {
      const int64_t len = std::min(chunk, n - s);
      at::Tensor z = chunk_logits(hidden, weight, s, len, temperature);
      at::Tensor l = at::logsumexp(z, {-1}, true);
      at::Tensor tgt = targets.narrow(0, s, len).unsqueeze(-1);
      logprobs.narrow(0, s, len).copy_((z.gather(-1, tgt) - l).squeeze(-1));
      lse.narrow(0, s, len).copy_(l.squeeze(-1));
      if (with_entropy || keep) {
        z.sub_(l);  // the chunk's log-softmax
      }
      if (with_entropy) {
        entropy.narrow(0, s, len).copy_(entropy_of(z));
      }
      if (keep) {
        kept = z;
      }
    }
    ctx->save_for_backward({hidden, weight, targets, lse, kept});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["chunk"] = chunk;
    ctx->set_materialize_grads(false);
    if (with_entropy) {
      return {logprobs, entropy};
    }
    return {logprobs};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& hidden = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& targets = saved[2];
    const at::Tensor& lse = saved[3];
    const at::Tensor& kept = saved[4];
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const at::Tensor g_lp = grads[0];
    const at::Tensor g_ent = grads.size() > 1 ? grads[1] : at::Tensor();
    const bool any_lp = g_lp.defined();
    const bool any_ent = g_ent.defined();
    if (!any_lp && !any_ent) {
      return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
              at::Tensor(), at::Tensor()};
    }
    const int64_t n = hidden.size(0);
    const bool want_hidden = ctx->needs_input_grad(0);
    const bool want_weight = ctx->needs_input_grad(1);
    at::Tensor grad_hidden = want_hidden ? at::empty_like(hidden) : at::Tensor();
    // The weight's gradient is summed over the chunks in fp32. For an fp32
    // leaf (a parameter) the chunks add straight into its .grad, as
    // AccumulateGrad would add the returned gradient: no [V, H] buffer is
    // allocated (none at all when .grad exists) and none waits in the
    // autograd engine for the embedding's gradient of a tied head.
    const bool into_grad = want_weight && weight.is_leaf() && weight.scalar_type() == at::kFloat;
    at::Tensor grad_weight;
    if (into_grad) {
      at::Tensor& g = weight.mutable_grad();
      if (!g.defined()) {
        g = at::zeros_like(weight, at::MemoryFormat::Contiguous);
      }
      grad_weight = g;
    } else if (want_weight) {
      grad_weight = at::zeros(weight.sizes(), weight.options().dtype(at::kFloat));
    }
    for (int64_t s = 0; s < n; s += chunk) {
      const int64_t len = std::min(chunk, n - s);
      // log-softmax of the chunk: kept from the forward (read only: the
      // backward may run again under retain_graph) or recomputed
      at::Tensor logp = kept.defined() ? kept.narrow(0, s, len)
                                       : chunk_logits(hidden, weight, s, len, temperature)
                                             .sub_(lse.narrow(0, s, len).unsqueeze(-1));
      at::Tensor p = logp.exp();
      // d logp_y / dz = onehot(y) - p; d H / dz = -p * (logp + H).
      // dz = -p * (g_lp + g_ent * (logp + H)) + g_lp * onehot(y)
      at::Tensor coef;
      if (any_ent) {
        at::Tensor ge = g_ent.narrow(0, s, len).unsqueeze(-1);
        // -sum(p * logp) per row as a batched dot product (no [c, V] temporary)
        at::Tensor ent = at::bmm(p.unsqueeze(1), logp.unsqueeze(2)).squeeze(-1).neg_();
        coef = logp.add(ent).mul_(ge);
        if (any_lp) {
          coef.add_(g_lp.narrow(0, s, len).unsqueeze(-1));
        }
      } else {
        coef = g_lp.narrow(0, s, len).unsqueeze(-1);
      }
      at::Tensor dz = p.mul_(coef).neg_();
      if (any_lp) {
        at::Tensor tgt = targets.narrow(0, s, len).unsqueeze(-1);
        dz.scatter_add_(-1, tgt, g_lp.narrow(0, s, len).unsqueeze(-1));
      }
      if (temperature != 1.0) {
        dz.div_(temperature);
      }
      if (hidden.scalar_type() != at::kFloat) {
        dz = dz.to(hidden.scalar_type());
      }
      if (want_hidden) {
        grad_hidden.narrow(0, s, len).copy_(at::matmul(dz, weight));
      }
      if (want_weight) {
        at::Tensor h = hidden.narrow(0, s, len);
        if (dz.scalar_type() == at::kFloat) {
          grad_weight.addmm_(dz.t(), h);
        } else {
          grad_weight.add_(at::matmul(dz.t(), h));
        }
      }
    }
    if (into_grad) {
      grad_weight = at::Tensor();  // already in weight.grad
    } else if (want_weight && weight.scalar_type() != at::kFloat) {
      grad_weight = grad_weight.to(weight.scalar_type());
    }
    return {grad_hidden, grad_weight, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

extern "C" {

void skyrl_torch_ops_free(void* ptr) { std::free(ptr); }

int skyrl_fused_adamw(void* const* params, const void* const* grads,
                      void* const* exp_avgs, void* const* exp_avg_sqs, size_t n,
                      double step, double lr, double beta1, double beta2,
                      double weight_decay, double eps, char** err) {
  return guard(err, [&] {
    if (n == 0) {
      return;
    }
    auto p = tensors(const_cast<const void* const*>(params), n);
    auto g = tensors(grads, n);
    auto m = tensors(const_cast<const void* const*>(exp_avgs), n);
    auto v = tensors(const_cast<const void* const*>(exp_avg_sqs), n);
    // The kernel reads the (already counted) step from one fp32 scalar per
    // parameter on the parameters' device; one shared scalar serves all.
    at::Tensor s = at::full({}, step, p[0].options().dtype(at::kFloat));
    std::vector<at::Tensor> steps(n, s);
    at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, steps, lr, beta1, beta2,
                      weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
  });
}

int skyrl_foreach_norm(const void* const* ptrs, size_t n, void** out, char** err) {
  return guard(err, [&] {
    if (n == 0) {
      *out = give(at::zeros({0}, at::kFloat));
      return;
    }
    auto norms = at::_foreach_norm(tensors(ptrs, n), 2, at::kFloat);
    *out = give(at::stack(norms));
  });
}

int skyrl_foreach_mul_scalar(void* const* ptrs, size_t n, double scalar, char** err) {
  return guard(err, [&] {
    if (n == 0) {
      return;
    }
    auto t = tensors(const_cast<const void* const*>(ptrs), n);
    at::_foreach_mul_(t, scalar);
  });
}

int skyrl_chunked_logprobs(const void* hidden, const void* weight, const void* targets,
                           double temperature, int64_t chunk, int with_entropy, int keep,
                           void** logprobs, void** entropy, char** err) {
  return guard(err, [&] {
    const at::Tensor& h = tensor_ref(hidden);
    TORCH_CHECK(chunk > 0, "chunk must be positive, got ", chunk);
    auto out = ChunkedLogprobs::apply(h, tensor_ref(weight), tensor_ref(targets), temperature,
                                      chunk, with_entropy != 0, keep != 0);
    *logprobs = give(out[0]);
    *entropy = with_entropy != 0 ? give(out[1]) : nullptr;
  });
}

}  // extern "C"
