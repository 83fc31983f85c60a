// AVX2 flash attention (GQA) and absorbed MLA: the shared driver
// (kernels/simd/attention_driver.h: KV tiles, online softmax, head groups) instantiated
// with 8-lane float vectors, maskload/maskstore for row tails, and this ISA's KV row
// converter.
#include <immintrin.h>

#include "kernels/avx2/dot_blocks.h"
#include "kernels/avx2/kernels_avx2.h"
#include "kernels/avx2/vec_math.h"
#include "kernels/simd/attention_driver.h"

namespace ds::avx2 {
namespace {

struct Vec8 {
  using T = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kRegs = 16;
  static constexpr bool kBf16Dot = false;  // no bf16 dot products: BF16 caches multiply in float
  static T zero() { return _mm256_setzero_ps(); }
  static T set1(float f) { return _mm256_set1_ps(f); }
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T load_tail(const float* p, int64_t i, int64_t n) { return load_masked(p, i, n); }
  static void store_tail(float* p, int64_t i, int64_t n, T v) { store_masked(p, i, n, v); }
  static T zero_tail(T v, int64_t i, int64_t n) { return _mm256_and_ps(_mm256_castsi256_ps(tail_mask(i, n)), v); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T fmadd(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T max(T a, T b) { return _mm256_max_ps(a, b); }
  static T exp(T x) { return exp_ps(x); }
  static float reduce_add(T v) { return hsum256(v); }
  static float reduce_max(T v) {
    const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
  }
  [[gnu::always_inline]] static T reduce_block(const T* a);
  [[gnu::always_inline]] static void transpose(T* r);
  static void load_kv_row(GgmlType t, const uint8_t* src, float* dst, int n);
  // Elements [i, i + 8) of a KV row of type KT (F32, F16 or BF16) as floats.
  template <GgmlType KT>
  [[gnu::always_inline]] static T load_kv(const uint8_t* row, int i) {
    if constexpr (KT == GgmlType::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i));
    if constexpr (KT == GgmlType::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

// Lane k = the sum of the 8 lanes of a[k], by one tree for every lane whatever the other
// inputs: s1[l] = v[l] + v[l + 4], s2[l] = s1[l] + s1[l + 2], s2[0] + s2[1] (the driver's
// [BATCH_INVARIANT] scores rely on it). Each step adds pairs of inputs' halves side by
// side; the last permute puts a[k]'s sum in lane k.
inline Vec8::T Vec8::reduce_block(const T* a) {
  __m256 b[4], c[2];
  for (int i = 0; i < 4; ++i)  // lanes 0-3: a[2i] halves, lanes 4-7: a[2i+1]
    b[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31));
  for (int i = 0; i < 2; ++i) {  // 128-bit lane 0: [a[4i], a[4i+2]], lane 1: [a[4i+1], a[4i+3]]
    const __m256d lo = _mm256_unpacklo_pd(_mm256_castps_pd(b[2 * i]), _mm256_castps_pd(b[2 * i + 1]));
    const __m256d hi = _mm256_unpackhi_pd(_mm256_castps_pd(b[2 * i]), _mm256_castps_pd(b[2 * i + 1]));
    c[i] = _mm256_add_ps(_mm256_castpd_ps(lo), _mm256_castpd_ps(hi));
  }
  // Lane 0: [a0, a2, a4, a6], lane 1: [a1, a3, a5, a7].
  const __m256 e = _mm256_add_ps(_mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(e, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// r[c] becomes column c of the 8 x 8 block whose row k was r[k] (lane k = old r[k][c]):
// pairs of rows interleaved, then pairs of pairs, then the 128-bit halves exchanged.
inline void Vec8::transpose(T* r) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {  // 128-bit half H: [r2i[4H], r2i+1[4H], r2i[4H+1], r2i+1[4H+1]] (lo)
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i)  // u[4i + c], half H: column 4H + c of rows 4i..4i+3
    for (int h = 0; h < 2; ++h) {
      u[4 * i + 2 * h] = _mm256_shuffle_ps(t[4 * i + h], t[4 * i + 2 + h], _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * i + 2 * h + 1] = _mm256_shuffle_ps(t[4 * i + h], t[4 * i + 2 + h], _MM_SHUFFLE(3, 2, 3, 2));
    }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}

// Converts n elements of one KV row to float (the reference conversion for tails).
void Vec8::load_kv_row(GgmlType t, const uint8_t* src, float* dst, int n) {
  int i = 0;
  switch (t) {
    case GgmlType::F32:
      for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(reinterpret_cast<const float*>(src) + i));
      break;
    case GgmlType::F16:
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
      break;
    case GgmlType::BF16:
      for (; i + 8 <= n; i += 8) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
      }
      break;
    case GgmlType::Q8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
      for (; i + 32 <= n; i += 32) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i / 32].d));
        for (int k = 0; k < 4; ++k) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i / 32].qs + 8 * k));
          _mm256_storeu_ps(dst + i + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
        }
      }
      break;
    }
    default:
      return;
  }
  if (i < n) {
    const size_t esz = t == GgmlType::F32 ? 4 : 2;
    ref::load_kv(t, src + esz * static_cast<size_t>(i), dst + i, n - i);  // F32/F16/BF16 tails only
  }
}

}  // namespace

void flash_attn(const AttnArgs& a) {
  simd::flash_attn<Vec8>(a);
}
void mla_attn(const MlaArgs& a) {
  simd::mla_attn<Vec8>(a);
}

}  // namespace ds::avx2
