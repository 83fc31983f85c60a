// AVX-512 (BW/VL, VNNI) block dot products: one small struct per weight type that
// unpacks a weight block into registers once (`unpack`) and multiplies the unpacked block
// with one activation block (`accumulate`), so the matmul tile loop (matmul.cpp) can reuse
// an unpacked block for several activation rows (STYLE.md habit 4).
//
// Numerics (SPEC.md): integer products per sub-block (u8 x s8 -> s16 pairs with maddubs,
// then s16 x s16 scale -> s32 with VNNI dpwssd, or dpbusd for 32-blocks). K-quant mins and
// the Q6_K/Q3_K offsets go through the activation's bsums. [KQUANT_EXACT] K-quants reduce
// each superblock's integer sums exactly and then apply the reference's float operations in
// the reference's order (dall * sumi - dmin * summ, summed block by block), so their dot
// products are bit-identical to kernels/ref on every ISA. [QUANT_EXACT] The 32-block types
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) do the same per block, so every quantized dot product is
// bit-identical to the reference.
//
// Every struct has: WBlock, ABlock, Unpacked, Acc, kBlock (elements), unpack(), zero(),
// accumulate(), reduce().
#pragma once
#include "kernels/avx512/intrinsics.h"

#include <cstring>

#include <cmath>

#include "kernels/quant/blocks.h"
#include "kernels/quant/iq_unpack.h"

namespace ds::avx512 {

#include "kernels/simd/x86_helpers.inc"
#include "kernels/simd/iquant_blocks.inc"

inline float hsum512(__m512 v) {
  return hsum256(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

// The 8 6-bit scales and 8 6-bit mins of a Q4_K/Q5_K block as 16 int16:
// [sc0..sc7, m0..m7].
inline __m256i k4_scales_mins(const uint8_t* q) {
  return _mm256_cvtepu8_epi16(k4_scale_min_bytes(q));
}

// Index vectors for _mm512_permutexvar_epi16: lanes 0..15 take value a, lanes 16..31 b.
inline __m512i idx_pair(int a, int b) {
  return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<short>(a)),
                                 _mm512_set1_epi16(static_cast<short>(b)));
}
// Lanes 8i..8i+7 take value base + i (i < 4).
inline __m512i idx_quad(int base) {
  return _mm512_set_epi16(base + 3, base + 3, base + 3, base + 3, base + 3, base + 3, base + 3, base + 3, base + 2,
                          base + 2, base + 2, base + 2, base + 2, base + 2, base + 2, base + 2, base + 1, base + 1,
                          base + 1, base + 1, base + 1, base + 1, base + 1, base + 1, base, base, base, base, base,
                          base, base, base);
}

// Shared by Q4_K and Q5_K: 4 registers of 64 unsigned quants (sub-blocks 2k and 2k+1),
// their int16 scales per lane, and the mins per group of 16 for the bsums.
struct UnpackedK4 {
  __m512i q[4];
  __m512i sc[4];
  __m256i mins;  // [m0, m0, m1, m1, ..., m7, m7]
  float d, dmin;
};
// A K-quant accumulator: the running float sum of the reference ([KQUANT_EXACT]).
struct AccK {
  float sum;
};
inline int hsum_epi32(__m512i v) {
  return hsum_epi32(_mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)));
}
// The lane sums of a (16 lanes) and b (8 lanes) together.
inline void hsum2_epi32(__m512i a, __m256i b, int* sa, int* sb) {
  const __m256i h = _mm256_hadd_epi32(_mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1)), b);
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));  // [a a b b]
  s = _mm_hadd_epi32(s, s);                                                              // [a b a b]
  *sa = _mm_cvtsi128_si32(s);
  *sb = _mm_extract_epi32(s, 1);
}

struct DotQ4K {
  using WBlock = BlockQ4_K;
  using ABlock = BlockQ8_K;
  using Unpacked = UnpackedK4;
  using Acc = AccK;
  static constexpr int kBlock = 256;

  static void unpack_scales(const uint8_t* scales, half_t d, half_t dmin, Unpacked& u) {
    const __m512i sm = _mm512_castsi256_si512(k4_scales_mins(scales));
    for (int k = 0; k < 4; ++k) u.sc[k] = _mm512_permutexvar_epi16(idx_pair(2 * k, 2 * k + 1), sm);
    const __m256i idx_m = _mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    u.mins = _mm256_permutexvar_epi16(idx_m, _mm512_castsi512_si256(sm));
    u.d = half_to_float(d);
    u.dmin = half_to_float(dmin);
  }
  // qs[32p + l]: low nibble = element 64p + l, high nibble = element 64p + 32 + l.
  static void unpack_nibbles(const uint8_t* qs, Unpacked& u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int h = 0; h < 2; ++h) {
      const __m512i v = _mm512_loadu_si512(qs + 64 * h);
      const __m512i lo = _mm512_and_si512(v, m4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      u.q[2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);
      u.q[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);
    }
  }
  [[gnu::always_inline]] static void unpack(const WBlock& b, Unpacked& u) {
    unpack_nibbles(b.qs, u);
    unpack_scales(b.scales, b.d, b.dmin, u);
  }
  static Acc zero() { return {0.0f}; }
  static void accumulate(const Unpacked& u, const ABlock& a, Acc& acc) {
    __m512i s = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
      const __m512i p = _mm512_maddubs_epi16(u.q[k], _mm512_loadu_si512(a.qs + 64 * k));
      s = _mm512_dpwssd_epi32(s, p, u.sc[k]);
    }
    const __m256i m = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), u.mins);
    int sumi, summ;
    hsum2_epi32(s, m, &sumi, &summ);
    const float dall = a.d * u.d, dmin = a.d * u.dmin;
    acc.sum += dall * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  static float reduce(const Acc& acc) { return acc.sum; }
};

struct DotQ5K : DotQ4K {
  using WBlock = BlockQ5_K;
  [[gnu::always_inline]] static void unpack(const WBlock& b, Unpacked& u) {
    unpack_nibbles(b.qs, u);
    // 5th bit of element 64p + l is bit 2p of qh[l], of element 64p + 32 + l bit 2p + 1.
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
    const __m512i sixteen = _mm512_set1_epi8(16);
    for (int k = 0; k < 4; ++k) {
      const __m512i bit =
          _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(static_cast<char>(1 << (2 * k))),
                                 _mm512_set1_epi8(static_cast<char>(1 << (2 * k + 1))));
      const __mmask64 set = _mm512_test_epi8_mask(qh, bit);
      u.q[k] = _mm512_mask_add_epi8(u.q[k], set, u.q[k], sixteen);
    }
    unpack_scales(b.scales, b.d, b.dmin, u);
  }
};

// K-quants with 16 signed scales per superblock and quants stored with an offset
// (Q6_K: q - 32, Q3_K: q - 4): unsigned quants in maddubs, the offset through bsums.
template <int kOffsetShift>
struct DotOffsetK {
  using ABlock = BlockQ8_K;
  static constexpr int kBlock = 256;
  struct Unpacked {
    __m512i q[4];   // elements 64i .. 64i + 63, unsigned
    __m512i sc[4];  // int16 scale per lane (sub-blocks of 16)
    __m256i sc16;   // the 16 scales, for the offset through bsums
    float d;
  };
  using Acc = AccK;
  static void set_scales(__m256i sc16, Unpacked& u) {
    u.sc16 = sc16;
    const __m512i s = _mm512_castsi256_si512(sc16);
    for (int i = 0; i < 4; ++i) u.sc[i] = _mm512_permutexvar_epi16(idx_quad(4 * i), s);
  }
  static Acc zero() { return {0.0f}; }
  static void accumulate(const Unpacked& u, const ABlock& a, Acc& acc) {
    __m512i s = _mm512_setzero_si512();
    for (int i = 0; i < 4; ++i) {
      const __m512i p = _mm512_maddubs_epi16(u.q[i], _mm512_loadu_si512(a.qs + 64 * i));
      s = _mm512_dpwssd_epi32(s, p, u.sc[i]);
    }
    // sum sc * (q - off) * a = sum sc * q * a - off * sum_j sc_j * bsums_j
    const __m256i off = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), u.sc16);
    int sumi, soff;
    hsum2_epi32(s, off, &sumi, &soff);
    sumi -= soff << kOffsetShift;
    acc.sum += (a.d * u.d) * static_cast<float>(sumi);
  }
  static float reduce(const Acc& acc) { return acc.sum; }
};

struct DotQ6K : DotOffsetK<5> {
  using WBlock = BlockQ6_K;

  [[gnu::always_inline]] static void unpack(const WBlock& b, Unpacked& u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
    const __m512i sh_lo = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(0), _mm512_set1_epi16(2));
    const __m512i sh_hi = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(4), _mm512_set1_epi16(6));
    for (int h = 0; h < 2; ++h) {
      // Element 128h + l (+32): low nibble of ql[l] (ql[l + 32]), bits 0-1 (2-3) of qh[l];
      // element 128h + 64 + l (+32): high nibbles, bits 4-5 (6-7).
      const __m512i ql = _mm512_loadu_si512(b.ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
      const __m512i h_lo = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh_lo), m2), 4);
      const __m512i h_hi = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh_hi), m2), 4);
      u.q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), h_lo);
      u.q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), h_hi);
    }
    set_scales(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales))), u);
    u.d = half_to_float(b.d);
  }
};

// Q2_K and Q3_K low bits: element 128n + 32s + l is bits 2s..2s+1 of qs[32n + l]. Register k
// holds elements 64k..64k+63: qs[32(k/2)..] shifted by 4(k%2) (first 32) and 4(k%2)+2.
inline __m512i crumbs(const uint8_t* qs, int k) {
  const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (k / 2))));
  const int s0 = 4 * (k % 2);
  const __m512i sh = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<short>(s0)),
                                             _mm512_set1_epi16(static_cast<short>(s0 + 2)));
  return _mm512_and_si512(_mm512_srlv_epi16(q, sh), _mm512_set1_epi8(3));
}

// Q2_K: x = d * (sc & 15) * q - dmin * (sc >> 4) per sub-block of 16; same accumulation as
// Q4_K (mins through bsums), with 16 scales instead of 8.
struct DotQ2K : DotQ4K {
  using WBlock = BlockQ2_K;
  [[gnu::always_inline]] static void unpack(const WBlock& b, Unpacked& u) {
    for (int k = 0; k < 4; ++k) u.q[k] = crumbs(b.qs, k);
    const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    const __m512i sc = _mm512_castsi256_si512(_mm256_and_si256(sm, _mm256_set1_epi16(15)));
    for (int k = 0; k < 4; ++k) u.sc[k] = _mm512_permutexvar_epi16(idx_quad(4 * k), sc);
    u.mins = _mm256_srli_epi16(sm, 4);
    u.d = half_to_float(b.d);
    u.dmin = half_to_float(b.dmin);
  }
};

// The 16 signed 6-bit scales of a Q3_K block as int8 (kernels/ref: q3_k_scales): low 4 bits
// from the nibbles of bytes 0..7 (j < 8: low nibble of byte j, else high nibble of byte
// j - 8), high 2 bits from byte 8 + j % 4 at bit 2 (j / 4); minus 32.
inline __m128i q3_k_scales(const uint8_t* p) {
  uint64_t lo8;
  uint32_t hi4;
  std::memcpy(&lo8, p, 8);
  std::memcpy(&hi4, p + 8, 4);
  const __m128i v = _mm_cvtsi64_si128(static_cast<long long>(lo8));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
  const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(hi4)), _mm_setr_epi32(0, 2, 4, 6)),
                                   _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

// Q3_K: q = low 2 bits - (hmask bit ? 0 : 4), stored here as low | hbit << 2 (= q + 4).
// The hmask bit of element 128n + 32s + l is bit 4n + s of hmask[l]: bits 2k, 2k + 1 for
// register k.
struct DotQ3K : DotOffsetK<2> {
  using WBlock = BlockQ3_K;
  [[gnu::always_inline]] static void unpack(const WBlock& b, Unpacked& u) {
    const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)));
    const __m512i four = _mm512_set1_epi8(4);
    for (int k = 0; k < 4; ++k) {
      const __m512i bit =
          _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(static_cast<char>(1 << (2 * k))),
                                 _mm512_set1_epi8(static_cast<char>(1 << (2 * k + 1))));
      const __m512i q = crumbs(b.qs, k);
      u.q[k] = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hm, bit), q, four);
    }
    set_scales(_mm256_cvtepi8_epi16(q3_k_scales(b.scales)), u);
    u.d = half_to_float(b.d);
  }
};

// 32-blocks against Q8_0 activations: signed weights in one ymm, |w| x (a * sign(w)) with
// dpbusd (u8 x s8), so the integer sum equals sum w * a exactly.
struct Unpacked32 {
  __m256i w;
  __m256i absw;
  float d;
};
struct Acc32 {
  float sum;  // the reference's running float sum ([QUANT_EXACT])
};
struct Dot32Base {
  using ABlock = BlockQ8_0;
  using Unpacked = Unpacked32;
  using Acc = Acc32;
  static constexpr int kBlock = 32;
  static Acc zero() { return {0.0f}; }
  static void finish_unpack(__m256i w, half_t d, Unpacked& u) {
    u.w = w;
    u.absw = _mm256_abs_epi8(w);
    u.d = half_to_float(d);
  }
  static void accumulate(const Unpacked& u, const ABlock& a, Acc& acc) {
    const __m256i s = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)), u.w);
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u.absw, s);
    acc.sum += static_cast<float>(hsum_epi32(p)) * (u.d * half_to_float(a.d));
  }
  static float reduce(const Acc& acc) { return acc.sum; }
};

// The four int32 sums of p[0..3] (8 lanes each): pairwise horizontal adds.
inline __m128i hsum4_epi32(const __m256i* p) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
// acc += v[0]; acc += v[1]; ... in order (the reference's running sum).
inline void add_in_order(__m128 v, float& acc) {
  alignas(16) float f[4];
  _mm_store_ps(f, v);
  for (int b = 0; b < 4; ++b) acc += f[b];
}
inline __m128 halves4(half_t a, half_t b, half_t c, half_t d) {
  return _mm_cvtph_ps(_mm_setr_epi16(static_cast<short>(a), static_cast<short>(b), static_cast<short>(c),
                                     static_cast<short>(d), 0, 0, 0, 0));
}

// Four consecutive blocks (GEMV fast path of the tile loop): per block exactly
// float(sumi) * (dx * dy), added to the running sum in block order ([QUANT_EXACT]).
template <class Base>
struct Group4 {
  static constexpr bool kGroup4 = true;
  static void accumulate4(const Unpacked32* u, const BlockQ8_0* a, Acc32& acc) {
    __m256i p[4];
    for (int b = 0; b < 4; ++b) {
      const __m256i s = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs)), u[b].w);
      p[b] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u[b].absw, s);
    }
    const __m128 dw = _mm_setr_ps(u[0].d, u[1].d, u[2].d, u[3].d);
    const __m128 dd = _mm_mul_ps(dw, halves4(a[0].d, a[1].d, a[2].d, a[3].d));
    add_in_order(_mm_mul_ps(_mm_cvtepi32_ps(hsum4_epi32(p)), dd), acc.sum);
  }
};

// qs[j]: low nibble = element j, high nibble = element j + 16.
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}

struct DotQ4_0 : Dot32Base, Group4<Dot32Base> {
  using WBlock = BlockQ4_0;
  [[gnu::always_inline]] static void unpack(const WBlock& b, Unpacked& u) {
    finish_unpack(_mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8)), b.d, u);
  }
};
struct DotQ5_0 : Dot32Base, Group4<Dot32Base> {
  using WBlock = BlockQ5_0;
  [[gnu::always_inline]] static void unpack(const WBlock& b, Unpacked& u) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    const __m256i hi = _mm256_and_si256(_mm256_movm_epi8(qh), _mm256_set1_epi8(0x10));
    finish_unpack(_mm256_sub_epi8(_mm256_or_si256(nibbles32(b.qs), hi), _mm256_set1_epi8(16)), b.d, u);
  }
};
struct DotQ8_0 : Dot32Base, Group4<Dot32Base> {
  using WBlock = BlockQ8_0;
  [[gnu::always_inline]] static void unpack(const WBlock& b, Unpacked& u) {
    finish_unpack(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)), b.d, u);
  }
};

// Q4_1/Q5_1 against Q8_1: x = d * q + m with unsigned q, so dpbusd takes the quants as
// they are; the min meets the activation block sum s: + m * s per block.
struct DotMin32Base {
  using ABlock = BlockQ8_1;
  static constexpr int kBlock = 32;
  struct Unpacked {
    __m256i q;
    float d, m;
  };
  using Acc = Acc32;
  static Acc zero() { return {0.0f}; }
  static void accumulate(const Unpacked& u, const ABlock& a, Acc& acc) {
    const __m256i p =
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), u.q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)));
    acc.sum += static_cast<float>(hsum_epi32(p)) * (u.d * half_to_float(a.d)) + u.m * half_to_float(a.s);
  }
  static float reduce(const Acc& acc) { return acc.sum; }
};
struct DotQ4_1 : DotMin32Base {
  using WBlock = BlockQ4_1;
  [[gnu::always_inline]] static void unpack(const WBlock& b, Unpacked& u) {
    u.q = nibbles32(b.qs);
    u.d = half_to_float(b.d);
    u.m = half_to_float(b.m);
  }
};
struct DotQ5_1 : DotMin32Base {
  using WBlock = BlockQ5_1;
  [[gnu::always_inline]] static void unpack(const WBlock& b, Unpacked& u) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    u.q = _mm256_or_si256(nibbles32(b.qs), _mm256_and_si256(_mm256_movm_epi8(qh), _mm256_set1_epi8(0x10)));
    u.d = half_to_float(b.d);
    u.m = half_to_float(b.m);
  }
};

}  // namespace ds::avx512
