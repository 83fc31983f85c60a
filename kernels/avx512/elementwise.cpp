// AVX-512 RMSNorm, SiLU gate, softmax and RoPE. Same formulas and order of float
// operations per element as kernels/ref/elementwise.cpp; sums of squares and softmax
// denominators accumulate in double lanes like the reference; exp is vec_math.h's.
// RoPE angles come from the reference's rope_cos_sin (scalar, once per token, shared by
// all heads); the rotation uses separate multiply and add so it matches the reference.
#include "kernels/avx512/intrinsics.h"

#include <cmath>

#include "kernels/avx512/kernels_avx512.h"
#include "kernels/avx512/vec_math.h"
#include "kernels/ref/ref.h"

namespace ds::avx512 {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  __m512d acc = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(tail_mask(i, n), x + i);
    const __m512 sq = _mm512_mul_ps(v, v);
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(sq, 1)));
  }
  const float mean = static_cast<float>(_mm512_reduce_add_pd(acc) / static_cast<double>(n));
  const __m512 scale = _mm512_set1_ps(1.0f / std::sqrt(mean + eps));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(i, n);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), scale);
    if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i));
    _mm512_mask_storeu_ps(y + i, m, v);
  }
}

void silu_mul(const float* g, const float* u, float* y, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(i, n);
    const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
    const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), x))));
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
  }
}

void softmax(float* x, int64_t n, float scale) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  const __m512 vs = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(i, n);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs);
    _mm512_mask_storeu_ps(x + i, m, v);
    vmax = _mm512_mask_max_ps(vmax, m, vmax, v);
  }
  const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512d sum = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(i, n);
    const __m512 e = _mm512_maskz_mov_ps(m, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mx)));
    _mm512_mask_storeu_ps(x + i, m, e);
    sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
  }
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / _mm512_reduce_add_pd(sum)));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(i, n);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

namespace {

// Adjacent pairs: with cs = [c0, s0, c1, s1, ...], y = x * [c0, c0, ..] + swap(x) * [-s0, s0, ..].
void rope_adjacent(float* x, const float* cs, int n_rot) {
  const __m512 sign = _mm512_castsi512_ps(_mm512_set_epi32(0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0,
                                                           INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN));
  for (int i = 0; i < n_rot; i += 16) {
    const __mmask16 m = tail_mask(i, n_rot);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 t = _mm512_maskz_loadu_ps(m, cs + i);
    const __m512 c = _mm512_moveldup_ps(t);
    const __m512 s = _mm512_xor_ps(_mm512_movehdup_ps(t), sign);
    const __m512 swapped = _mm512_permute_ps(v, 0xB1);
    _mm512_mask_storeu_ps(x + i, m, _mm512_add_ps(_mm512_mul_ps(v, c), _mm512_mul_ps(swapped, s)));
  }
}

// Halves: (x[i], x[i + half]) with separate cos and sin arrays.
void rope_neox(float* x, const float* c, const float* s, int half) {
  for (int i = 0; i < half; i += 16) {
    const __mmask16 m = tail_mask(i, half);
    const __m512 x0 = _mm512_maskz_loadu_ps(m, x + i), x1 = _mm512_maskz_loadu_ps(m, x + i + half);
    const __m512 vc = _mm512_maskz_loadu_ps(m, c + i), vs = _mm512_maskz_loadu_ps(m, s + i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_sub_ps(_mm512_mul_ps(x0, vc), _mm512_mul_ps(x1, vs)));
    _mm512_mask_storeu_ps(x + i + half, m, _mm512_add_ps(_mm512_mul_ps(x0, vs), _mm512_mul_ps(x1, vc)));
  }
}

}  // namespace

void rope(const RopeArgs& a, const RopeParams& p) {
  float cs[1024], c[512], s[512];  // n_rot <= 1024
  const int half = p.n_rot / 2;
  for (int64_t it = 0; it < a.n_tok; ++it) {
    ref::rope_cos_sin(p, a.pos[it], cs);
    if (p.neox)
      for (int i = 0; i < half; ++i) {
        c[i] = cs[2 * i];
        s[i] = cs[2 * i + 1];
      }
    for (int ih = 0; ih < a.n_head; ++ih) {
      float* x = a.x + it * a.tok_stride + ih * a.head_stride;
      if (p.neox)
        rope_neox(x, c, s, half);
      else
        rope_adjacent(x, cs, p.n_rot);
    }
  }
}

}  // namespace ds::avx512
