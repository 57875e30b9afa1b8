// Attention for one query position per row (a decode step), on CPU in fp32.
//
// SDPA's CPU kernels multiply through BLAS, which packs (copies) every block
// of keys and values before using it: with one query per row that copy costs
// as much as the product. These loops read each key and value once: one pass
// for the scores (every query head of a group against each key), libtorch's
// softmax over them, one pass for the weighted sum of the values. Masked keys
// (an additive -inf) are skipped in both passes. The loops are compiled twice,
// with AVX2+FMA intrinsics (head sizes that are multiples of 8) and as plain
// loops for the rest, and picked at run time.
#include "shim_common.h"
#include "torch_ops.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cmath>
#include <limits>

namespace {

using skyrl_shim::give;
using skyrl_shim::guard;
using skyrl_shim::tensor_ref;

// Multiply-adds a parallel_for chunk should hold before waking a thread for
// it is worth it (a wake-up costs about 0.1-0.2 ms under OMP_WAIT_POLICY=PASSIVE).
constexpr int64_t kMinChunkWork = int64_t(1) << 20;

// The operands of one call, as raw fp32 pointers and element strides.
struct Operands {
  int64_t heads, groups, keys, dim;  // Hkv, G, S, D
  const float* q;                    // [B, Hkv, G, D] contiguous
  const float* k;                    // [B, Hkv, S, D], D contiguous
  const float* v;
  int64_t kv_b, kv_h, kv_s;          // element strides of k and v
  const float* mask;                 // [B, S], additive, contiguous
  int64_t mask_b;
  float scale;
  float* scores;                     // [B, Hkv, G, S] contiguous
  float* out;                        // [B, Hkv, G, D] contiguous
};

#define SKYRL_INLINE inline __attribute__((always_inline))

// Where row r, one (batch, kv head) pair, finds its operands.
struct Row {
  const float* q;     // [G, D]
  const float* k;     // key s at k + s * kv_s
  const float* v;     // value s at v + s * kv_s
  const float* mask;  // [S]
  float* scores;      // [G, S]
  float* out;         // [G, D]
};

SKYRL_INLINE Row row_at(const Operands& o, int64_t r) {
  const int64_t b = r / o.heads, h = r % o.heads;
  const int64_t kv = b * o.kv_b + h * o.kv_h;
  return Row{o.q + r * o.groups * o.dim, o.k + kv, o.v + kv, o.mask + b * o.mask_b,
             o.scores + r * o.groups * o.keys, o.out + r * o.groups * o.dim};
}

SKYRL_INLINE float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int64_t l = 0; l < 8; ++l) {
      acc[l] += a[i + l] * b[i + l];
    }
  }
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) {
    s += a[i] * b[i];
  }
  return s;
}

SKYRL_INLINE void axpy(float* y, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] += a * x[i];
  }
}

// Scores of keys [from, S) of one row: every query head against each key.
SKYRL_INLINE void row_scores(const Operands& o, const Row& row, int64_t from) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t s = from; s < o.keys; ++s) {
    const float m = row.mask[s];
    const float* key = row.k + s * o.kv_s;
    for (int64_t g = 0; g < o.groups; ++g) {
      row.scores[g * o.keys + s] =
          m == neg_inf ? neg_inf : dot(row.q + g * o.dim, key, o.dim) * o.scale + m;
    }
  }
}

// Adds keys [from, S) of one row to its output: probabilities (`scores` now
// holds the softmax) times values, skipping zero weights (masked keys).
SKYRL_INLINE void row_values(const Operands& o, const Row& row, int64_t from) {
  for (int64_t s = from; s < o.keys; ++s) {
    const float* value = row.v + s * o.kv_s;
    for (int64_t g = 0; g < o.groups; ++g) {
      const float w = row.scores[g * o.keys + s];
      if (w != 0.0f) {
        axpy(row.out + g * o.dim, w, value, o.dim);
      }
    }
  }
}

#define SKYRL_AVX2 __attribute__((target("avx2,fma")))

// The eight sums of eight vectors' lanes, as one vector.
SKYRL_AVX2 SKYRL_INLINE __m256 sum_lanes8(const __m256 (&a)[8]) {
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                       _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Scores of rows [begin, end) for a head size that is a multiple of 8: eight keys at a time,
// one accumulator each, their sums reduced together.
SKYRL_AVX2 void scores_avx2(const Operands& o, int64_t begin, int64_t end) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const __m256 scale = _mm256_set1_ps(o.scale);
  const int64_t whole = o.keys / 8 * 8;
  for (int64_t r = begin; r < end; ++r) {
    const Row row = row_at(o, r);
    const float *q = row.q, *k = row.k, *mask = row.mask;
    float* scores = row.scores;
    for (int64_t s = 0; s < whole; s += 8) {
      const __m256 m = _mm256_loadu_ps(mask + s);
      if (_mm256_movemask_ps(_mm256_cmp_ps(m, _mm256_set1_ps(neg_inf), _CMP_EQ_OQ)) == 0xff) {
        for (int64_t g = 0; g < o.groups; ++g) {
          _mm256_storeu_ps(scores + g * o.keys + s, m);
        }
        continue;
      }
      const float* block = k + s * o.kv_s;
      for (int64_t g = 0; g < o.groups; ++g) {
        __m256 acc[8];
        for (int kk = 0; kk < 8; ++kk) {
          acc[kk] = _mm256_setzero_ps();
        }
        for (int64_t c = 0; c < o.dim; c += 8) {
          const __m256 qv = _mm256_loadu_ps(q + g * o.dim + c);
          for (int kk = 0; kk < 8; ++kk) {
            acc[kk] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(block + kk * o.kv_s + c), acc[kk]);
          }
        }
        _mm256_storeu_ps(scores + g * o.keys + s, _mm256_fmadd_ps(sum_lanes8(acc), scale, m));
      }
    }
    row_scores(o, row, whole);
  }
}

// Outputs of rows [begin, end) for a head size that is a multiple of 8: eight keys at a time,
// each query head's output chunk kept in a register across them.
SKYRL_AVX2 void values_avx2(const Operands& o, int64_t begin, int64_t end) {
  const int64_t whole = o.keys / 8 * 8;
  for (int64_t r = begin; r < end; ++r) {
    const Row row = row_at(o, r);
    const float *v = row.v, *p = row.scores;
    float* out = row.out;
    std::fill(out, out + o.groups * o.dim, 0.0f);
    for (int64_t s = 0; s < whole; s += 8) {
      const float* block = v + s * o.kv_s;
      for (int64_t g = 0; g < o.groups; ++g) {
        const __m256 w = _mm256_loadu_ps(p + g * o.keys + s);
        if (_mm256_movemask_ps(_mm256_cmp_ps(w, _mm256_setzero_ps(), _CMP_EQ_OQ)) == 0xff) {
          continue;  // all eight weights are 0 (masked keys)
        }
        float lanes[8];
        _mm256_storeu_ps(lanes, w);
        for (int64_t c = 0; c < o.dim; c += 8) {
          __m256 acc0 = _mm256_loadu_ps(out + g * o.dim + c);
          __m256 acc1 = _mm256_setzero_ps();
          for (int kk = 0; kk < 8; kk += 2) {
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(lanes[kk]),
                                   _mm256_loadu_ps(block + kk * o.kv_s + c), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_set1_ps(lanes[kk + 1]),
                                   _mm256_loadu_ps(block + (kk + 1) * o.kv_s + c), acc1);
          }
          _mm256_storeu_ps(out + g * o.dim + c, _mm256_add_ps(acc0, acc1));
        }
      }
    }
    row_values(o, row, whole);
  }
}

// The same for any head size, without intrinsics.
void scores_base(const Operands& o, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    row_scores(o, row_at(o, r), 0);
  }
}
void values_base(const Operands& o, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const Row row = row_at(o, r);
    std::fill(row.out, row.out + o.groups * o.dim, 0.0f);
    row_values(o, row, 0);
  }
}

bool has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

at::Tensor decode_attention(const at::Tensor& q_in, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& mask, double scale) {
  TORCH_CHECK(q_in.dim() == 4 && k.dim() == 4 && v.dim() == 4 && mask.dim() == 2,
              "decode_attention: q [B, Hkv, G, D], k/v [B, Hkv, S, D], mask [B, S]");
  TORCH_CHECK(q_in.scalar_type() == at::kFloat && k.scalar_type() == at::kFloat &&
                  v.scalar_type() == at::kFloat && mask.scalar_type() == at::kFloat,
              "decode_attention: fp32 only");
  TORCH_CHECK(q_in.is_cpu() && k.is_cpu() && v.is_cpu() && mask.is_cpu(),
              "decode_attention: CPU only");
  TORCH_CHECK(k.sizes() == v.sizes() && k.strides() == v.strides(),
              "decode_attention: keys and values differ in shape or strides");
  TORCH_CHECK(k.stride(3) == 1, "decode_attention: the head dimension must be contiguous");
  const int64_t B = q_in.size(0), H = q_in.size(1), G = q_in.size(2), D = q_in.size(3);
  const int64_t S = k.size(2);
  TORCH_CHECK(k.size(0) == B && k.size(1) == H && k.size(3) == D && mask.size(0) == B &&
                  mask.size(1) == S,
              "decode_attention: shapes do not match");
  at::Tensor q = q_in.contiguous();
  const at::Tensor mask_rows = mask.contiguous();
  at::Tensor scores = at::empty({B, H, G, S}, q.options());
  at::Tensor out = at::empty({B, H, G, D}, q.options());
  Operands o{H,
             G,
             S,
             D,
             q.const_data_ptr<float>(),
             k.const_data_ptr<float>(),
             v.const_data_ptr<float>(),
             k.stride(0),
             k.stride(1),
             k.stride(2),
             mask_rows.const_data_ptr<float>(),
             S,
             static_cast<float>(scale),
             scores.mutable_data_ptr<float>(),
             out.mutable_data_ptr<float>()};
  const bool avx2 = D % 8 == 0 && has_avx2_fma();
  const int64_t grain = std::max<int64_t>(1, kMinChunkWork / std::max<int64_t>(1, G * S * D));
  at::parallel_for(0, B * H, grain, [&](int64_t b, int64_t e) {
    avx2 ? scores_avx2(o, b, e) : scores_base(o, b, e);
  });
  at::_softmax_out(scores, scores, -1, false);
  at::parallel_for(0, B * H, grain, [&](int64_t b, int64_t e) {
    avx2 ? values_avx2(o, b, e) : values_base(o, b, e);
  });
  return out;
}

}  // namespace

extern "C" int skyrl_decode_attention(const void* q, const void* k, const void* v,
                                      const void* mask, double scale, void** out, char** err) {
  return guard(err, [&] {
    *out = give(decode_attention(tensor_ref(q), tensor_ref(k), tensor_ref(v), tensor_ref(mask),
                                 scale));
  });
}
