// AVX2 int8 peak loop (see kernels/peak.h): the pre-VNNI idiom, vpmaddubsw (32 u8 x s8
// products summed in pairs to int16) then vpmaddwd with ones (pairs to int32) then
// vpaddd, in 8 independent chains. Inline asm for the same reason as the VNNI loop: the
// loop must measure the arithmetic, not the compiler's spills.
#include <immintrin.h>

#include "kernels/peak.h"

namespace ds::peak {

uint64_t int8_madds_avx2(uint64_t n_iter, int32_t* sink) {
  const __m256i a = _mm256_set1_epi8(3);   // u8 operand
  const __m256i b = _mm256_set1_epi8(-2);  // s8 operand
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c[8];
  for (int i = 0; i < 8; ++i) c[i] = _mm256_set1_epi32(i);
  __m256i t0, t1;  // products; register renaming makes reuse free
  uint64_t n = n_iter;
  if (n > 0) {
    __asm__ volatile(
        "1:\n\t"
        "vpmaddubsw %[b], %[a], %[t0]\n\t"
        "vpmaddwd %[ones], %[t0], %[t0]\n\t"
        "vpaddd %[t0], %[c0], %[c0]\n\t"
        "vpmaddubsw %[b], %[a], %[t1]\n\t"
        "vpmaddwd %[ones], %[t1], %[t1]\n\t"
        "vpaddd %[t1], %[c1], %[c1]\n\t"
        "vpmaddubsw %[b], %[a], %[t0]\n\t"
        "vpmaddwd %[ones], %[t0], %[t0]\n\t"
        "vpaddd %[t0], %[c2], %[c2]\n\t"
        "vpmaddubsw %[b], %[a], %[t1]\n\t"
        "vpmaddwd %[ones], %[t1], %[t1]\n\t"
        "vpaddd %[t1], %[c3], %[c3]\n\t"
        "vpmaddubsw %[b], %[a], %[t0]\n\t"
        "vpmaddwd %[ones], %[t0], %[t0]\n\t"
        "vpaddd %[t0], %[c4], %[c4]\n\t"
        "vpmaddubsw %[b], %[a], %[t1]\n\t"
        "vpmaddwd %[ones], %[t1], %[t1]\n\t"
        "vpaddd %[t1], %[c5], %[c5]\n\t"
        "vpmaddubsw %[b], %[a], %[t0]\n\t"
        "vpmaddwd %[ones], %[t0], %[t0]\n\t"
        "vpaddd %[t0], %[c6], %[c6]\n\t"
        "vpmaddubsw %[b], %[a], %[t1]\n\t"
        "vpmaddwd %[ones], %[t1], %[t1]\n\t"
        "vpaddd %[t1], %[c7], %[c7]\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        : [c0] "+x"(c[0]), [c1] "+x"(c[1]), [c2] "+x"(c[2]), [c3] "+x"(c[3]), [c4] "+x"(c[4]), [c5] "+x"(c[5]),
          [c6] "+x"(c[6]), [c7] "+x"(c[7]), [t0] "=&x"(t0), [t1] "=&x"(t1), [n] "+r"(n)
        : [a] "x"(a), [b] "x"(b), [ones] "x"(ones)
        : "cc");
  }
  __m256i sum = c[0];
  for (int i = 1; i < 8; ++i) sum = _mm256_add_epi32(sum, c[i]);
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  const __m128i s2 = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  *sink = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xb1)));
  return n_iter * 8 * 32;
}

}  // namespace ds::peak

namespace ds::peak {

// 12 vfmadd132ps ymm chains in ymm4-15, c = c * 1 + 0.5 (as the AVX-512 loop).
uint64_t f32_fmas_avx2(uint64_t n_iter, float* sink) {
  const __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(0.5f);
  alignas(32) float c[12][8];
  for (int k = 0; k < 12; ++k)
    for (float& x : c[k]) x = static_cast<float>(k);
  uint64_t n = n_iter;
  if (n > 0) {
    // AT&T order: vfmadd132ps a, b, acc computes acc = acc * a + b.
    __asm__ volatile(
        "vmovaps 0(%[c]), %%ymm4\n\t"
        "vmovaps 32(%[c]), %%ymm5\n\t"
        "vmovaps 64(%[c]), %%ymm6\n\t"
        "vmovaps 96(%[c]), %%ymm7\n\t"
        "vmovaps 128(%[c]), %%ymm8\n\t"
        "vmovaps 160(%[c]), %%ymm9\n\t"
        "vmovaps 192(%[c]), %%ymm10\n\t"
        "vmovaps 224(%[c]), %%ymm11\n\t"
        "vmovaps 256(%[c]), %%ymm12\n\t"
        "vmovaps 288(%[c]), %%ymm13\n\t"
        "vmovaps 320(%[c]), %%ymm14\n\t"
        "vmovaps 352(%[c]), %%ymm15\n\t"
        "1:\n\t"
        "vfmadd132ps %[a], %[b], %%ymm4\n\t"
        "vfmadd132ps %[a], %[b], %%ymm5\n\t"
        "vfmadd132ps %[a], %[b], %%ymm6\n\t"
        "vfmadd132ps %[a], %[b], %%ymm7\n\t"
        "vfmadd132ps %[a], %[b], %%ymm8\n\t"
        "vfmadd132ps %[a], %[b], %%ymm9\n\t"
        "vfmadd132ps %[a], %[b], %%ymm10\n\t"
        "vfmadd132ps %[a], %[b], %%ymm11\n\t"
        "vfmadd132ps %[a], %[b], %%ymm12\n\t"
        "vfmadd132ps %[a], %[b], %%ymm13\n\t"
        "vfmadd132ps %[a], %[b], %%ymm14\n\t"
        "vfmadd132ps %[a], %[b], %%ymm15\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        "vmovaps %%ymm4, 0(%[c])\n\t"
        "vmovaps %%ymm5, 32(%[c])\n\t"
        "vmovaps %%ymm6, 64(%[c])\n\t"
        "vmovaps %%ymm7, 96(%[c])\n\t"
        "vmovaps %%ymm8, 128(%[c])\n\t"
        "vmovaps %%ymm9, 160(%[c])\n\t"
        "vmovaps %%ymm10, 192(%[c])\n\t"
        "vmovaps %%ymm11, 224(%[c])\n\t"
        "vmovaps %%ymm12, 256(%[c])\n\t"
        "vmovaps %%ymm13, 288(%[c])\n\t"
        "vmovaps %%ymm14, 320(%[c])\n\t"
        "vmovaps %%ymm15, 352(%[c])\n\t"
        : [n] "+r"(n)
        : [a] "x"(a), [b] "x"(b), [c] "r"(c)
        : "cc", "memory", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
          "xmm15");
  }
  float total = 0.0f;
  for (const auto& chain : c)
    for (float x : chain) total += x;
  *sink = total;
  return n_iter * 12 * 8;
}

}  // namespace ds::peak
