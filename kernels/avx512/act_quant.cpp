// AVX-512 activation quantization, bit-exact to kernels/quant/act_quant.cpp (SPEC.md):
// the same float operations per element (x * (127/amax) for Q8_0/Q8_1 [Q8_0_X86], iscale * x
// for Q8_K, both rounded half to even), only vectorized. Maxima and
// integer sums are order-independent, so they can be reduced in any order.
// F16 uses the hardware conversion (round to nearest even, like fp16.h); BF16 rounds with
// integer arithmetic because the hardware conversion flushes denormals.
#include "kernels/avx512/intrinsics.h"

#include <cstring>

#include "kernels/avx512/kernels_avx512.h"
#include "kernels/quant/fp16.h"

namespace ds::avx512 {
namespace {

// [QUANT_CLAMP] Finite inputs quantize into [-127, 127] by construction; NaN or infinity
// converts to INT32_MIN. Clamping keeps the stored int8 quants and their sums consistent and
// the int32 sums far from overflow (a block of INT32_MIN lanes overflowed the reduction,
// undefined behaviour that UBSan reported), whatever the activations hold.
__m512i clamp_q(__m512i q) {
  return _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
}

// One 32-block: returns the quants' sum and the unrounded d; stores fp16(d) and the quants.
int quantize_block32(const float* x, half_t* d_out, int8_t* qs, float* d_f32) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  *d_out = f32_to_fp16(d);
  *d_f32 = d;
  const __m512i q0 = clamp_q(_mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id))));
  const __m512i q1 = clamp_q(_mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id))));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtepi32_epi8(q1));
  return _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  float d;
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) quantize_block32(x + ib * kQK8_0, &y[ib].d, y[ib].qs, &d);
}

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t ib = 0; ib < n / kQK8_1; ++ib) {
    float d;
    const int sum = quantize_block32(x + ib * kQK8_1, &y[ib].d, y[ib].qs, &d);
    // s = d * sum with the unrounded float d, as the reference.
    y[ib].s = f32_to_fp16(static_cast<float>(sum) * d);
  }
}

void quantize_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t ib = 0; ib < n / kQK_K; ++ib, x += kQK_K) {
    BlockQ8_K& b = y[ib];
    __m512 amax_v = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i) amax_v = _mm512_max_ps(amax_v, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)));
    const float amax = _mm512_reduce_max_ps(amax_v);
    if (amax == 0.0f) {
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    // The first element of largest magnitude, with its sign (as the reference's scan).
    float max = 0.0f;
    for (int i = 0; i < 16; ++i) {
      const __mmask16 hit =
          _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit) {
        max = x[16 * i + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int i = 0; i < 16; ++i) {
      const __m512i q = clamp_q(_mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * i))));  // half to even
      _mm_storeu_si128(reinterpret_cast<__m128i*>(b.qs + 16 * i), _mm512_cvtepi32_epi8(q));
      b.bsums[i] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    b.d = 1.0f / iscale;
  }
}

void to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(y + i, m, h);
  }
}

// Round to nearest even on the bit pattern; NaN keeps its sign and becomes quiet.
void to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
    _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtepi32_epi16(r));
  }
}

}  // namespace

void quantize_act(GgmlType act_type, const float* x, void* y, int64_t n) {
  switch (act_type) {
    case GgmlType::Q8_K:
      return quantize_q8_K(x, static_cast<BlockQ8_K*>(y), n);
    case GgmlType::Q8_0:
      return quantize_q8_0(x, static_cast<BlockQ8_0*>(y), n);
    case GgmlType::Q8_1:
      return quantize_q8_1(x, static_cast<BlockQ8_1*>(y), n);
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
  if (t == GgmlType::Q8_0) return quantize_q8_0(x, static_cast<BlockQ8_0*>(y), n);
  quantize_act(t, x, y, n);
}

}  // namespace ds::avx512
