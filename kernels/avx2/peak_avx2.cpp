// AVX2 int8 peak loop (see kernels/peak.h): the pre-VNNI idiom, vpmaddubsw (32 u8 x s8
// products summed in pairs to int16) then vpmaddwd with ones (pairs to int32) then
// vpaddd. Eight chains from four u8 and two s8 operands (15 of the 16 ymm registers);
// the operands are laundered through an empty asm every iteration so the compiler
// cannot hoist the loop-invariant products.
#include <immintrin.h>

#include "kernels/peak.h"

namespace ds::peak {

uint64_t int8_madds_avx2(uint64_t n_iter, int32_t* sink) {
  __m256i a0 = _mm256_set1_epi8(3), a1 = _mm256_set1_epi8(5), a2 = _mm256_set1_epi8(7),
          a3 = _mm256_set1_epi8(9);
  __m256i b0 = _mm256_set1_epi8(-2), b1 = _mm256_set1_epi8(4);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c[8];
  for (int i = 0; i < 8; ++i) c[i] = _mm256_set1_epi32(i);
  auto step = [&](__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  };
  for (uint64_t it = 0; it < n_iter; ++it) {
    __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(b0), "+x"(b1));
    c[0] = step(c[0], a0, b0);
    c[1] = step(c[1], a0, b1);
    c[2] = step(c[2], a1, b0);
    c[3] = step(c[3], a1, b1);
    c[4] = step(c[4], a2, b0);
    c[5] = step(c[5], a2, b1);
    c[6] = step(c[6], a3, b0);
    c[7] = step(c[7], a3, b1);
  }
  __m256i sum = c[0];
  for (int i = 1; i < 8; ++i) sum = _mm256_add_epi32(sum, c[i]);
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  const __m128i s2 = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  *sink = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xb1)));
  return n_iter * 8 * 32;
}

}  // namespace ds::peak
