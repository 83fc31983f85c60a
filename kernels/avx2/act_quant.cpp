// AVX2 activation quantization, bit-exact to kernels/quant/act_quant.cpp (SPEC.md): the
// same float operations per element as the reference, 8 lanes at a time; maxima and
// integer sums are order-independent. Row tails of F16/BF16 use the scalar conversions.
#include <immintrin.h>

#include <cstring>

#include "kernels/avx2/kernels_avx2.h"
#include "kernels/quant/fp16.h"

namespace ds::avx2 {
namespace {

__m256 abs_ps(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// Four vectors of 8 int32 (each in [-128, 127]) -> 32 int8 in element order.
__m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
  const __m256i q = _mm256_packs_epi16(ab, cd);  // lane-interleaved: fix with a permute
  return _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// [QUANT_CLAMP] Finite inputs quantize into [-127, 127]; NaN or infinity converts to
// INT32_MIN: clamped, so that the stored quants and their sums agree whatever x holds.
__m256i clamp_q(__m256i q) {
  return _mm256_max_epi32(_mm256_min_epi32(q, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
}

int quantize_block32(const float* x, half_t* d_out, int8_t* qs, float* d_f32) {
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(amax, abs_ps(v[i]));
  }
  // [Q8_0_X86]: id = 127 / amax, round half to even.
  const float a = hmax(amax);
  const float d = a / 127.0f;
  const float id = a != 0.0f ? 127.0f / a : 0.0f;
  *d_out = f32_to_fp16(d);
  *d_f32 = d;
  __m256i q[4];
  for (int i = 0; i < 4; ++i) {
    q[i] = clamp_q(_mm256_cvtps_epi32(
        _mm256_round_ps(_mm256_mul_ps(v[i], _mm256_set1_ps(id)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack32(q[0], q[1], q[2], q[3]));
  return hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
}

void quantize_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t ib = 0; ib < n / kQK_K; ++ib, x += kQK_K) {
    BlockQ8_K& b = y[ib];
    __m256 amax_v = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i) amax_v = _mm256_max_ps(amax_v, abs_ps(_mm256_loadu_ps(x + 8 * i)));
    const float amax = hmax(amax_v);
    if (amax == 0.0f) {
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    float max = 0.0f;  // the first element of largest magnitude, with its sign
    for (int j = 0; j < kQK_K; ++j)
      if (x[j] == amax || x[j] == -amax) {
        max = x[j];
        break;
      }
    const float iscale = -127.0f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int g = 0; g < 8; ++g) {  // 32 quants per step: two bsums
      __m256i q[4];
      for (int i = 0; i < 4; ++i)
        q[i] = clamp_q(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * g + 8 * i))));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.qs + 32 * g), pack32(q[0], q[1], q[2], q[3]));
      b.bsums[2 * g] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
      b.bsums[2 * g + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
    }
    b.d = 1.0f / iscale;
  }
}

void to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = f32_to_fp16(x[i]);
}

void to_bf16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    // NaN (|u| > inf as signed compare is safe: both sides < 2^31): quiet, keep the sign.
    const __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
    r = _mm256_blendv_epi8(r, qnan, nan);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), packed);
  }
  for (; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

}  // namespace

void quantize_act(GgmlType act_type, const float* x, void* y, int64_t n) {
  float d;
  switch (act_type) {
    case GgmlType::Q8_K:
      return quantize_q8_K(x, static_cast<BlockQ8_K*>(y), n);
    case GgmlType::Q8_0: {
      auto* b = static_cast<BlockQ8_0*>(y);
      for (int64_t ib = 0; ib < n / kQK8_0; ++ib) quantize_block32(x + ib * kQK8_0, &b[ib].d, b[ib].qs, &d);
      return;
    }
    case GgmlType::Q8_1: {
      auto* b = static_cast<BlockQ8_1*>(y);
      for (int64_t ib = 0; ib < n / kQK8_1; ++ib) {
        const int sum = quantize_block32(x + ib * kQK8_1, &b[ib].d, b[ib].qs, &d);
        b[ib].s = f32_to_fp16(static_cast<float>(sum) * d);  // unrounded d, as the reference
      }
      return;
    }
    case GgmlType::F16:
      return to_f16(x, static_cast<uint16_t*>(y), n);
    case GgmlType::BF16:
      return to_bf16(x, static_cast<uint16_t*>(y), n);
    case GgmlType::F32:
      std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
      return;
    default:
      return;
  }
}

void store_kv(GgmlType t, const float* x, void* y, int64_t n) {
  quantize_act(t, x, y, n);
}

}  // namespace ds::avx2
