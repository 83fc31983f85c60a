// AVX-512 peak loops (see kernels/peak.h): 16 independent zmm chains of one instruction
// (vpdpbusd, vfmadd132ps or vdpbf16ps), more than latency x throughput on current cores
// (about 4-5 cycles x 1-2 per cycle on Zen 4/5 and Sapphire Rapids). The loops are inline
// asm because this is a measurement: with intrinsics GCC 12 keeps some accumulators on
// the stack and the loop turns into a load/store test. The chains live in zmm16-31
// (declared clobbered), loaded from and stored to c[] (16 x 64 bytes, 64-byte aligned).
#include "kernels/avx512/intrinsics.h"

#include "kernels/peak.h"

// The asm of one loop: zmm16-31 loaded from c, n times OP into each, stored back to c. OP
// is the instruction with its two sources, e.g. "vpdpbusd %[b], %[a], " (AT&T order:
// sources first, the accumulator last).
#define DS_PEAK_ON_EACH_ZMM(OP)                                                                            \
  OP "%%zmm16\n\t" OP "%%zmm17\n\t" OP "%%zmm18\n\t" OP "%%zmm19\n\t" OP "%%zmm20\n\t" OP "%%zmm21\n\t" OP \
     "%%zmm22\n\t" OP "%%zmm23\n\t" OP "%%zmm24\n\t" OP "%%zmm25\n\t" OP "%%zmm26\n\t" OP "%%zmm27\n\t" OP \
     "%%zmm28\n\t" OP "%%zmm29\n\t" OP "%%zmm30\n\t" OP "%%zmm31\n\t"
#define DS_PEAK_LOOP(OP, n, a, b, c) \
  __asm__ volatile( \
  "vmovaps 0(%[c]), %%zmm16\n\t" \
  "vmovaps 64(%[c]), %%zmm17\n\t" \
  "vmovaps 128(%[c]), %%zmm18\n\t" \
  "vmovaps 192(%[c]), %%zmm19\n\t" \
  "vmovaps 256(%[c]), %%zmm20\n\t" \
  "vmovaps 320(%[c]), %%zmm21\n\t" \
  "vmovaps 384(%[c]), %%zmm22\n\t" \
  "vmovaps 448(%[c]), %%zmm23\n\t" \
  "vmovaps 512(%[c]), %%zmm24\n\t" \
  "vmovaps 576(%[c]), %%zmm25\n\t" \
  "vmovaps 640(%[c]), %%zmm26\n\t" \
  "vmovaps 704(%[c]), %%zmm27\n\t" \
  "vmovaps 768(%[c]), %%zmm28\n\t" \
  "vmovaps 832(%[c]), %%zmm29\n\t" \
  "vmovaps 896(%[c]), %%zmm30\n\t" \
  "vmovaps 960(%[c]), %%zmm31\n\t" \
  "1:\n\t" DS_PEAK_ON_EACH_ZMM(OP) "dec %[n]\n\t" \
  "jnz 1b\n\t" \
  "vmovaps %%zmm16, 0(%[c])\n\t" \
  "vmovaps %%zmm17, 64(%[c])\n\t" \
  "vmovaps %%zmm18, 128(%[c])\n\t" \
  "vmovaps %%zmm19, 192(%[c])\n\t" \
  "vmovaps %%zmm20, 256(%[c])\n\t" \
  "vmovaps %%zmm21, 320(%[c])\n\t" \
  "vmovaps %%zmm22, 384(%[c])\n\t" \
  "vmovaps %%zmm23, 448(%[c])\n\t" \
  "vmovaps %%zmm24, 512(%[c])\n\t" \
  "vmovaps %%zmm25, 576(%[c])\n\t" \
  "vmovaps %%zmm26, 640(%[c])\n\t" \
  "vmovaps %%zmm27, 704(%[c])\n\t" \
  "vmovaps %%zmm28, 768(%[c])\n\t" \
  "vmovaps %%zmm29, 832(%[c])\n\t" \
  "vmovaps %%zmm30, 896(%[c])\n\t" \
  "vmovaps %%zmm31, 960(%[c])\n\t" \
  : [n] "+r"(n) \
  : [a] "v"(a), [b] "v"(b), [c] "r"(c) \
  : "cc", "memory", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31")

namespace ds::peak {
namespace {

// Chain k's lanes start at k.
void init_chains(float (&c)[16][16]) {
  for (int k = 0; k < 16; ++k)
    for (float& x : c[k]) x = static_cast<float>(k);
}

// Sum of every float of c (exact for the closed forms the tests check).
float sum_chains(const float (&c)[16][16]) {
  float total = 0.0f;
  for (const auto& chain : c)
    for (float x : chain) total += x;
  return total;
}

}  // namespace

uint64_t int8_madds_avx512_vnni(uint64_t n_iter, int32_t* sink) {
  const __m512i a = _mm512_set1_epi8(3);   // u8 operand
  const __m512i b = _mm512_set1_epi8(-2);  // s8 operand
  alignas(64) __m512i c[16];
  for (int i = 0; i < 16; ++i) c[i] = _mm512_set1_epi32(i);
  uint64_t n = n_iter;
  // vpdpbusd s8, u8, acc: acc += the sum of 4 u8 * s8 products per lane.
  if (n > 0) DS_PEAK_LOOP("vpdpbusd %[b], %[a], ", n, a, b, c);
  __m512i sum = c[0];
  for (int i = 1; i < 16; ++i) sum = _mm512_add_epi32(sum, c[i]);
  // Through memory: GCC 12's lane-extract intrinsics trip -Wuninitialized.
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, sum);
  int32_t total = 0;
  for (int32_t v : lanes) total += v;
  *sink = total;
  return n_iter * 16 * 64;
}

// 16 vfmadd132ps chains (latency 4 x 2 per cycle needs 8), c = c * 1 + 0.5: chain k's
// lanes hold k + 0.5 n, exact in float for the counts measured.
uint64_t f32_fmas_avx512(uint64_t n_iter, float* sink) {
  const __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(0.5f);
  alignas(64) float c[16][16];
  init_chains(c);
  uint64_t n = n_iter;
  // vfmadd132ps a, b, acc: acc = acc * a + b.
  if (n > 0) DS_PEAK_LOOP("vfmadd132ps %[a], %[b], ", n, a, b, c);
  *sink = sum_chains(c);
  return n_iter * 16 * 16;
}

// 16 vdpbf16ps chains (the caller checks AVX512_BF16; inline asm needs no target flag): a
// and b hold the bf16 pairs (1, 1) and (0.5, 0.5), so chain k's lanes hold k + n after n
// iterations, exact in float for the counts measured.
uint64_t bf16_madds_avx512(uint64_t n_iter, float* sink) {
  const __m512i a = _mm512_set1_epi32(0x3F803F80);  // bf16 1.0, 1.0
  const __m512i b = _mm512_set1_epi32(0x3F003F00);  // bf16 0.5, 0.5
  alignas(64) float c[16][16];
  init_chains(c);
  uint64_t n = n_iter;
  // vdpbf16ps b, a, acc: acc += a.lo * b.lo + a.hi * b.hi per lane.
  if (n > 0) DS_PEAK_LOOP("vdpbf16ps %[b], %[a], ", n, a, b, c);
  *sink = sum_chains(c);
  return n_iter * 16 * 32;
}

}  // namespace ds::peak

#undef DS_PEAK_LOOP
#undef DS_PEAK_ON_EACH_ZMM
