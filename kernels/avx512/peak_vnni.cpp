// AVX-512 VNNI peak loop (see kernels/peak.h): 16 independent vpdpbusd zmm chains, more
// than latency x throughput on current cores (about 4-5 cycles x 1-2 per cycle on
// Zen 4/5 and Sapphire Rapids), each instruction 64 u8 x s8 multiply-adds into 16 int32
// lanes. The loop is inline asm because this is a measurement: with intrinsics GCC 12
// keeps some accumulators on the stack and the loop turns into a load/store test. The
// chains live in zmm16-31 (declared clobbered), loaded from and stored to c[].
#include <immintrin.h>

#include "kernels/peak.h"

namespace ds::peak {

uint64_t int8_madds_avx512_vnni(uint64_t n_iter, int32_t* sink) {
  const __m512i a = _mm512_set1_epi8(3);   // u8 operand
  const __m512i b = _mm512_set1_epi8(-2);  // s8 operand
  alignas(64) __m512i c[16];
  for (int i = 0; i < 16; ++i) c[i] = _mm512_set1_epi32(i);
  uint64_t n = n_iter;
  if (n > 0) {
    // AT&T order: vpdpbusd s8, u8, acc  (acc += sum of 4 u8*s8 products per lane)
    __asm__ volatile(
      "vmovdqa64 0(%[c]), %%zmm16\n\t"
      "vmovdqa64 64(%[c]), %%zmm17\n\t"
      "vmovdqa64 128(%[c]), %%zmm18\n\t"
      "vmovdqa64 192(%[c]), %%zmm19\n\t"
      "vmovdqa64 256(%[c]), %%zmm20\n\t"
      "vmovdqa64 320(%[c]), %%zmm21\n\t"
      "vmovdqa64 384(%[c]), %%zmm22\n\t"
      "vmovdqa64 448(%[c]), %%zmm23\n\t"
      "vmovdqa64 512(%[c]), %%zmm24\n\t"
      "vmovdqa64 576(%[c]), %%zmm25\n\t"
      "vmovdqa64 640(%[c]), %%zmm26\n\t"
      "vmovdqa64 704(%[c]), %%zmm27\n\t"
      "vmovdqa64 768(%[c]), %%zmm28\n\t"
      "vmovdqa64 832(%[c]), %%zmm29\n\t"
      "vmovdqa64 896(%[c]), %%zmm30\n\t"
      "vmovdqa64 960(%[c]), %%zmm31\n\t"
      "1:\n\t"
      "vpdpbusd %[b], %[a], %%zmm16\n\t"
      "vpdpbusd %[b], %[a], %%zmm17\n\t"
      "vpdpbusd %[b], %[a], %%zmm18\n\t"
      "vpdpbusd %[b], %[a], %%zmm19\n\t"
      "vpdpbusd %[b], %[a], %%zmm20\n\t"
      "vpdpbusd %[b], %[a], %%zmm21\n\t"
      "vpdpbusd %[b], %[a], %%zmm22\n\t"
      "vpdpbusd %[b], %[a], %%zmm23\n\t"
      "vpdpbusd %[b], %[a], %%zmm24\n\t"
      "vpdpbusd %[b], %[a], %%zmm25\n\t"
      "vpdpbusd %[b], %[a], %%zmm26\n\t"
      "vpdpbusd %[b], %[a], %%zmm27\n\t"
      "vpdpbusd %[b], %[a], %%zmm28\n\t"
      "vpdpbusd %[b], %[a], %%zmm29\n\t"
      "vpdpbusd %[b], %[a], %%zmm30\n\t"
      "vpdpbusd %[b], %[a], %%zmm31\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      "vmovdqa64 %%zmm16, 0(%[c])\n\t"
      "vmovdqa64 %%zmm17, 64(%[c])\n\t"
      "vmovdqa64 %%zmm18, 128(%[c])\n\t"
      "vmovdqa64 %%zmm19, 192(%[c])\n\t"
      "vmovdqa64 %%zmm20, 256(%[c])\n\t"
      "vmovdqa64 %%zmm21, 320(%[c])\n\t"
      "vmovdqa64 %%zmm22, 384(%[c])\n\t"
      "vmovdqa64 %%zmm23, 448(%[c])\n\t"
      "vmovdqa64 %%zmm24, 512(%[c])\n\t"
      "vmovdqa64 %%zmm25, 576(%[c])\n\t"
      "vmovdqa64 %%zmm26, 640(%[c])\n\t"
      "vmovdqa64 %%zmm27, 704(%[c])\n\t"
      "vmovdqa64 %%zmm28, 768(%[c])\n\t"
      "vmovdqa64 %%zmm29, 832(%[c])\n\t"
      "vmovdqa64 %%zmm30, 896(%[c])\n\t"
      "vmovdqa64 %%zmm31, 960(%[c])\n\t"
      : [n] "+r"(n)
      : [a] "v"(a), [b] "v"(b), [c] "r"(c)
      : "cc", "memory", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
  }
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

}  // namespace ds::peak

namespace ds::peak {

// 16 vfmadd132ps zmm chains in zmm16-31 (latency 4 x 2 per cycle needs 8), c = c * 1 + 0.5:
// chain k's lanes hold k + 0.5 n, exact in float for the counts measured.
uint64_t f32_fmas_avx512(uint64_t n_iter, float* sink) {
  const __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(0.5f);
  alignas(64) float c[16][16];
  for (int k = 0; k < 16; ++k)
    for (float& x : c[k]) x = static_cast<float>(k);
  uint64_t n = n_iter;
  if (n > 0) {
    // AT&T order: vfmadd132ps a, b, acc computes acc = acc * a + b.
    __asm__ volatile(
      "vmovaps 0(%[c]), %%zmm16\n\t"
      "vmovaps 64(%[c]), %%zmm17\n\t"
      "vmovaps 128(%[c]), %%zmm18\n\t"
      "vmovaps 192(%[c]), %%zmm19\n\t"
      "vmovaps 256(%[c]), %%zmm20\n\t"
      "vmovaps 320(%[c]), %%zmm21\n\t"
      "vmovaps 384(%[c]), %%zmm22\n\t"
      "vmovaps 448(%[c]), %%zmm23\n\t"
      "vmovaps 512(%[c]), %%zmm24\n\t"
      "vmovaps 576(%[c]), %%zmm25\n\t"
      "vmovaps 640(%[c]), %%zmm26\n\t"
      "vmovaps 704(%[c]), %%zmm27\n\t"
      "vmovaps 768(%[c]), %%zmm28\n\t"
      "vmovaps 832(%[c]), %%zmm29\n\t"
      "vmovaps 896(%[c]), %%zmm30\n\t"
      "vmovaps 960(%[c]), %%zmm31\n\t"
      "1:\n\t"
      "vfmadd132ps %[a], %[b], %%zmm16\n\t"
      "vfmadd132ps %[a], %[b], %%zmm17\n\t"
      "vfmadd132ps %[a], %[b], %%zmm18\n\t"
      "vfmadd132ps %[a], %[b], %%zmm19\n\t"
      "vfmadd132ps %[a], %[b], %%zmm20\n\t"
      "vfmadd132ps %[a], %[b], %%zmm21\n\t"
      "vfmadd132ps %[a], %[b], %%zmm22\n\t"
      "vfmadd132ps %[a], %[b], %%zmm23\n\t"
      "vfmadd132ps %[a], %[b], %%zmm24\n\t"
      "vfmadd132ps %[a], %[b], %%zmm25\n\t"
      "vfmadd132ps %[a], %[b], %%zmm26\n\t"
      "vfmadd132ps %[a], %[b], %%zmm27\n\t"
      "vfmadd132ps %[a], %[b], %%zmm28\n\t"
      "vfmadd132ps %[a], %[b], %%zmm29\n\t"
      "vfmadd132ps %[a], %[b], %%zmm30\n\t"
      "vfmadd132ps %[a], %[b], %%zmm31\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      "vmovaps %%zmm16, 0(%[c])\n\t"
      "vmovaps %%zmm17, 64(%[c])\n\t"
      "vmovaps %%zmm18, 128(%[c])\n\t"
      "vmovaps %%zmm19, 192(%[c])\n\t"
      "vmovaps %%zmm20, 256(%[c])\n\t"
      "vmovaps %%zmm21, 320(%[c])\n\t"
      "vmovaps %%zmm22, 384(%[c])\n\t"
      "vmovaps %%zmm23, 448(%[c])\n\t"
      "vmovaps %%zmm24, 512(%[c])\n\t"
      "vmovaps %%zmm25, 576(%[c])\n\t"
      "vmovaps %%zmm26, 640(%[c])\n\t"
      "vmovaps %%zmm27, 704(%[c])\n\t"
      "vmovaps %%zmm28, 768(%[c])\n\t"
      "vmovaps %%zmm29, 832(%[c])\n\t"
      "vmovaps %%zmm30, 896(%[c])\n\t"
      "vmovaps %%zmm31, 960(%[c])\n\t"
      : [n] "+r"(n)
      : [a] "v"(a), [b] "v"(b), [c] "r"(c)
      : "cc", "memory", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
  }
  float total = 0.0f;
  for (const auto& chain : c)
    for (float x : chain) total += x;
  *sink = total;
  return n_iter * 16 * 16;
}

}  // namespace ds::peak

namespace ds::peak {

// 16 vdpbf16ps zmm chains in zmm16-31 (the caller checks AVX512_BF16; inline asm needs no
// target flag): a and b hold the bf16 pairs (1, 1) and (0.5, 0.5), so chain k's lanes hold
// k + n after n iterations, exact in float for the counts measured.
uint64_t bf16_madds_avx512(uint64_t n_iter, float* sink) {
  const __m512i a = _mm512_set1_epi32(0x3F803F80);  // bf16 1.0, 1.0
  const __m512i b = _mm512_set1_epi32(0x3F003F00);  // bf16 0.5, 0.5
  alignas(64) float c[16][16];
  for (int k = 0; k < 16; ++k)
    for (float& x : c[k]) x = static_cast<float>(k);
  uint64_t n = n_iter;
  if (n > 0) {
    // AT&T order: vdpbf16ps b, a, acc computes acc += a.lo * b.lo + a.hi * b.hi per lane.
    __asm__ volatile(
      "vmovaps 0(%[c]), %%zmm16\n\t"
      "vmovaps 64(%[c]), %%zmm17\n\t"
      "vmovaps 128(%[c]), %%zmm18\n\t"
      "vmovaps 192(%[c]), %%zmm19\n\t"
      "vmovaps 256(%[c]), %%zmm20\n\t"
      "vmovaps 320(%[c]), %%zmm21\n\t"
      "vmovaps 384(%[c]), %%zmm22\n\t"
      "vmovaps 448(%[c]), %%zmm23\n\t"
      "vmovaps 512(%[c]), %%zmm24\n\t"
      "vmovaps 576(%[c]), %%zmm25\n\t"
      "vmovaps 640(%[c]), %%zmm26\n\t"
      "vmovaps 704(%[c]), %%zmm27\n\t"
      "vmovaps 768(%[c]), %%zmm28\n\t"
      "vmovaps 832(%[c]), %%zmm29\n\t"
      "vmovaps 896(%[c]), %%zmm30\n\t"
      "vmovaps 960(%[c]), %%zmm31\n\t"
      "1:\n\t"
      "vdpbf16ps %[b], %[a], %%zmm16\n\t"
      "vdpbf16ps %[b], %[a], %%zmm17\n\t"
      "vdpbf16ps %[b], %[a], %%zmm18\n\t"
      "vdpbf16ps %[b], %[a], %%zmm19\n\t"
      "vdpbf16ps %[b], %[a], %%zmm20\n\t"
      "vdpbf16ps %[b], %[a], %%zmm21\n\t"
      "vdpbf16ps %[b], %[a], %%zmm22\n\t"
      "vdpbf16ps %[b], %[a], %%zmm23\n\t"
      "vdpbf16ps %[b], %[a], %%zmm24\n\t"
      "vdpbf16ps %[b], %[a], %%zmm25\n\t"
      "vdpbf16ps %[b], %[a], %%zmm26\n\t"
      "vdpbf16ps %[b], %[a], %%zmm27\n\t"
      "vdpbf16ps %[b], %[a], %%zmm28\n\t"
      "vdpbf16ps %[b], %[a], %%zmm29\n\t"
      "vdpbf16ps %[b], %[a], %%zmm30\n\t"
      "vdpbf16ps %[b], %[a], %%zmm31\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      "vmovaps %%zmm16, 0(%[c])\n\t"
      "vmovaps %%zmm17, 64(%[c])\n\t"
      "vmovaps %%zmm18, 128(%[c])\n\t"
      "vmovaps %%zmm19, 192(%[c])\n\t"
      "vmovaps %%zmm20, 256(%[c])\n\t"
      "vmovaps %%zmm21, 320(%[c])\n\t"
      "vmovaps %%zmm22, 384(%[c])\n\t"
      "vmovaps %%zmm23, 448(%[c])\n\t"
      "vmovaps %%zmm24, 512(%[c])\n\t"
      "vmovaps %%zmm25, 576(%[c])\n\t"
      "vmovaps %%zmm26, 640(%[c])\n\t"
      "vmovaps %%zmm27, 704(%[c])\n\t"
      "vmovaps %%zmm28, 768(%[c])\n\t"
      "vmovaps %%zmm29, 832(%[c])\n\t"
      "vmovaps %%zmm30, 896(%[c])\n\t"
      "vmovaps %%zmm31, 960(%[c])\n\t"
      : [n] "+r"(n)
      : [a] "v"(a), [b] "v"(b), [c] "r"(c)
      : "cc", "memory", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
  }
  float total = 0.0f;
  for (const auto& chain : c)
    for (float x : chain) total += x;
  *sink = total;
  return n_iter * 16 * 32;
}

}  // namespace ds::peak
