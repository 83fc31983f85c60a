// AVX2 RMSNorm, SiLU gate, softmax and RoPE: kernels/avx512/elementwise.cpp with 8 lanes
// (same formulas and per-element float operations as the reference; double sums).
#include <immintrin.h>

#include <cmath>

#include "kernels/avx2/kernels_avx2.h"
#include "kernels/avx2/vec_math.h"
#include "kernels/ref/ref.h"

namespace ds::avx2 {
namespace {

double hsum_pd(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
__m256d add_widened(__m256d acc, __m256 v) {
  acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  __m256d acc = _mm256_setzero_pd();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = load_masked(x, i, n);
    acc = add_widened(acc, _mm256_mul_ps(v, v));
  }
  const float mean = static_cast<float>(hsum_pd(acc) / static_cast<double>(n));
  const __m256 scale = _mm256_set1_ps(1.0f / std::sqrt(mean + eps));
  for (int64_t i = 0; i < n; i += 8) {
    __m256 v = _mm256_mul_ps(load_masked(x, i, n), scale);
    if (w) v = _mm256_mul_ps(v, load_masked(w, i, n));
    store_masked(y, i, n, v);
  }
}

void silu_mul(const float* g, const float* u, float* y, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 x = load_masked(g, i, n);
    const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x))));
    store_masked(y, i, n, _mm256_mul_ps(s, load_masked(u, i, n)));
  }
}

void softmax(float* x, int64_t n, float scale) {
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  const __m256 vs = _mm256_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 m = _mm256_castsi256_ps(tail_mask(i, n));
    const __m256 v = _mm256_mul_ps(load_masked(x, i, n), vs);
    store_masked(x, i, n, v);
    vmax = _mm256_blendv_ps(vmax, _mm256_max_ps(vmax, v), m);
  }
  const __m256 mx = _mm256_set1_ps(hmax(vmax));
  __m256d sum = _mm256_setzero_pd();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 m = _mm256_castsi256_ps(tail_mask(i, n));
    const __m256 e = _mm256_and_ps(m, exp_ps(_mm256_sub_ps(load_masked(x, i, n), mx)));
    store_masked(x, i, n, e);
    sum = add_widened(sum, e);
  }
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / hsum_pd(sum)));
  for (int64_t i = 0; i < n; i += 8) store_masked(x, i, n, _mm256_mul_ps(load_masked(x, i, n), inv));
}

void rope(const RopeArgs& a, const RopeParams& p) {
  float cs[1024], c[512], s[512];  // n_rot <= 1024
  const int half = p.n_rot / 2;
  const __m256 sign = _mm256_castsi256_ps(_mm256_setr_epi32(INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0));
  for (int64_t it = 0; it < a.n_tok; ++it) {
    ref::rope_cos_sin(p, a.pos[it], cs);
    for (int i = 0; i < half; ++i) {
      c[i] = cs[2 * i];
      s[i] = cs[2 * i + 1];
    }
    for (int ih = 0; ih < a.n_head; ++ih) {
      float* x = a.x + it * a.tok_stride + ih * a.head_stride;
      if (p.neox) {
        for (int i = 0; i < half; i += 8) {
          const __m256 x0 = load_masked(x, i, half), x1 = load_masked(x + half, i, half);
          const __m256 vc = load_masked(c, i, half), vs = load_masked(s, i, half);
          store_masked(x, i, half, _mm256_sub_ps(_mm256_mul_ps(x0, vc), _mm256_mul_ps(x1, vs)));
          store_masked(x + half, i, half, _mm256_add_ps(_mm256_mul_ps(x0, vs), _mm256_mul_ps(x1, vc)));
        }
      } else {
        // y = x * [c0, c0, ..] + swap(x) * [-s0, s0, ..], as (x0 c - x1 s, x0 s + x1 c).
        for (int i = 0; i < p.n_rot; i += 8) {
          const __m256 v = load_masked(x, i, p.n_rot);
          const __m256 t = load_masked(cs, i, p.n_rot);
          const __m256 vc = _mm256_moveldup_ps(t);
          const __m256 vs = _mm256_xor_ps(_mm256_movehdup_ps(t), sign);
          const __m256 swapped = _mm256_permute_ps(v, 0xB1);
          store_masked(x, i, p.n_rot, _mm256_add_ps(_mm256_mul_ps(v, vc), _mm256_mul_ps(swapped, vs)));
        }
      }
    }
  }
}

}  // namespace ds::avx2
