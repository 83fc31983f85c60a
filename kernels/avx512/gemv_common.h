// Pieces shared by the AVX-512 decode GEMV files (matmul_gemv.cpp, matmul_gemv32.cpp):
// 4 weight rows per pass (rows rstep apart), the transposing reductions that put row r's
// sum in lane r, and the store of the 4 results. Internal to kernels/avx512.
#pragma once
#include "kernels/avx512/intrinsics.h"

#include <cstddef>
#include <cstdint>

namespace ds::avx512::gemv {

constexpr int kRows = 4;  // weight rows per pass
// 16 bytes of each of 4 rows (at p, p + stride, ...) as the 4 128-bit lanes of a zmm.
inline __m512i load4x16(const uint8_t* p, size_t stride) {
  __m512i x = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  x = _mm512_inserti32x4(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + stride)), 1);
  x = _mm512_inserti32x4(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * stride)), 2);
  return _mm512_inserti32x4(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3 * stride)), 3);
}

// a[r]: 16 int32 lanes of row r. Pairs of rows interleaved (unpack 32), then pairs of
// pairs (unpack 64): 128-bit chunk c of the result is [r0 r1 r2 r3], row r's sum over
// its own chunk c.
inline __m512i transpose_add4(const __m512i* a) {
  const __m512i x01 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[0], a[1]), _mm512_unpackhi_epi32(a[0], a[1]));
  const __m512i x23 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2], a[3]), _mm512_unpackhi_epi32(a[2], a[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(x01, x23), _mm512_unpackhi_epi64(x01, x23));
}
// Row r's sum of all 16 lanes of a[r], in lane r.
inline __m128i reduce_rows4(const __m512i* a) {
  const __m512i y = transpose_add4(a);
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(y), _mm512_extracti64x4_epi64(y, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
// Every lane of each 128-bit chunk: the sum of that chunk.
inline __m512i chunk_sums(__m512i t) {
  t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_BADC));
  return _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_CDAB));
}
// t holds row r's partials in 128-bit chunk r: [sum of chunk 0, ..., sum of chunk 3].
inline __m128i reduce_chunks4(__m512i t) {
  return _mm512_castsi512_si128(
      _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), chunk_sums(t)));
}

// Row k's result (lane k of v) to out[k * rstep]: adjacent rows in one store.
inline void store_rows4(float* out, int64_t rstep, __m128 v) {
  if (rstep == 1) return _mm_storeu_ps(out, v);
  alignas(16) float o[kRows];
  _mm_store_ps(o, v);
  for (int k = 0; k < kRows; ++k) out[k * rstep] = o[k];
}

// Index vector for _mm512_permutexvar_epi16: lane i takes value f(i).
template <class F>
inline __m512i idx16(F f) {
  alignas(64) int16_t v[32];
  for (int i = 0; i < 32; ++i) v[i] = static_cast<int16_t>(f(i));
  return _mm512_load_si512(v);
}

}  // namespace ds::avx512::gemv
