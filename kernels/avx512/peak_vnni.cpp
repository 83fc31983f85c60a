// AVX-512 VNNI peak loop (see kernels/peak.h): 24 independent vpdpbusd zmm chains, more
// than latency x throughput on current cores (5 cycles x 2 per cycle on Zen 4/5,
// Sapphire Rapids), each instruction 64 u8 x s8 multiply-adds into 16 int32 lanes.
#include <immintrin.h>

#include "kernels/peak.h"

namespace ds::peak {

namespace {
constexpr int kChains = 24;
}

uint64_t int8_madds_avx512_vnni(uint64_t n_iter, int32_t* sink) {
  __m512i a = _mm512_set1_epi8(3);
  __m512i b = _mm512_set1_epi8(-2);
  __asm__ volatile("" : "+v"(a), "+v"(b));  // opaque operands: nothing to constant-fold
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  for (uint64_t it = 0; it < n_iter; ++it) {
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    // An empty asm that "modifies" one accumulator keeps the compiler from folding the
    // arithmetic chain into a multiplication by n_iter.
    __asm__ volatile("" : "+v"(acc[0]));
  }
  __m512i sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  // Through memory: GCC 12's lane-extract intrinsics trip -Wuninitialized.
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, sum);
  int32_t total = 0;
  for (int32_t v : lanes) total += v;
  *sink = total;
  return n_iter * kChains * 64;
}

}  // namespace ds::peak
