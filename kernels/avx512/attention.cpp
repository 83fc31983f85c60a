// AVX-512 flash attention (GQA) and absorbed MLA: the shared driver
// (kernels/simd/attention_driver.h: KV tiles, online softmax, head groups) instantiated
// with 16-lane float vectors, masked loads for row tails, and this ISA's KV row converter.
#include <immintrin.h>

#include "kernels/avx512/kernels_avx512.h"
#include "kernels/avx512/vec_math.h"
#include "kernels/simd/attention_driver.h"

namespace ds::avx512 {
namespace {

struct Vec16 {
  using T = __m512;
  static constexpr int kWidth = 16;
  static T zero() { return _mm512_setzero_ps(); }
  static T set1(float f) { return _mm512_set1_ps(f); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T load_tail(const float* p, int64_t i, int64_t n) { return _mm512_maskz_loadu_ps(tail_mask(i, n), p + i); }
  static void store_tail(float* p, int64_t i, int64_t n, T v) { _mm512_mask_storeu_ps(p + i, tail_mask(i, n), v); }
  static T zero_tail(T v, int64_t i, int64_t n) { return _mm512_maskz_mov_ps(tail_mask(i, n), v); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T exp(T x) { return exp_ps(x); }
  static float reduce_add(T v) { return _mm512_reduce_add_ps(v); }
  static void load_kv_row(GgmlType t, const uint8_t* src, float* dst, int n);
};

// Converts n elements of one KV row to float.
void Vec16::load_kv_row(GgmlType t, const uint8_t* src, float* dst, int n) {
  switch (t) {
    case GgmlType::F32:
      for (int i = 0; i < n; i += 16)
        _mm512_mask_storeu_ps(dst + i, tail_mask(i, n), _mm512_maskz_loadu_ps(tail_mask(i, n), src + 4 * i));
      return;
    case GgmlType::F16:
      for (int i = 0; i < n; i += 16) {
        const __m256i h = _mm256_maskz_loadu_epi16(tail_mask(i, n), src + 2 * i);
        _mm512_mask_storeu_ps(dst + i, tail_mask(i, n), _mm512_cvtph_ps(h));
      }
      return;
    case GgmlType::BF16:
      for (int i = 0; i < n; i += 16) {
        const __m256i h = _mm256_maskz_loadu_epi16(tail_mask(i, n), src + 2 * i);
        _mm512_mask_storeu_ps(dst + i, tail_mask(i, n), _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
      }
      return;
    case GgmlType::Q8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
      for (int ib = 0; ib < n / 32; ++ib) {
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(b[ib].d));
        const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[ib].qs));
        const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[ib].qs + 16));
        _mm512_storeu_ps(dst + 32 * ib, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0))));
        _mm512_storeu_ps(dst + 32 * ib + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1))));
      }
      return;
    }
    default: return;
  }
}

}  // namespace

void flash_attn(const AttnArgs& a) { simd::flash_attn<Vec16>(a); }
void mla_attn(const MlaArgs& a) { simd::mla_attn<Vec16>(a); }

}  // namespace ds::avx512
