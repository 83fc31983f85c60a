// AVX2 block dot products: the same shape as kernels/avx512/dot_blocks.h (unpack a weight
// block once, accumulate it against several activation blocks) with 256-bit registers and
// without VNNI: u8 x s8 -> s16 pairs with maddubs, then s16 x s16 scale -> s32 with madd.
// Integer sums per sub-block are exact (maddubs cannot saturate for these ranges). K-quants
// reduce each superblock's integers exactly and then follow the reference's float order, so
// they are bit-identical to kernels/ref ([KQUANT_EXACT], see kernels/avx512/dot_blocks.h);
// so are the 32-blocks ([QUANT_EXACT]).
#pragma once
#include <immintrin.h>

#include <cstring>

#include <cmath>

#include "kernels/quant/blocks.h"
#include "kernels/quant/iq_unpack.h"
#include "kernels/ref/ref.h"

namespace ds::avx2 {

#include "kernels/simd/x86_helpers.inc"
#include "kernels/simd/iquant_blocks.inc"

// sum of w (u8) * a (s8) in int32 lanes, each lane weighted by the int16 scale lanes.
inline __m256i dot_scaled(__m256i w, __m256i a, __m256i scale16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), scale16);
}

struct AccK {
  float sum;  // the reference's running float sum ([KQUANT_EXACT])
};

// Q4_K / Q5_K: eight registers of 32 unsigned quants (one sub-block each), scales
// broadcast per register, mins per group of 16 for the bsums.
struct DotQ4K {
  using WBlock = BlockQ4_K;
  using ABlock = BlockQ8_K;
  static constexpr int kBlock = 256;
  struct Unpacked {
    __m256i q[8];
    __m256i sc[8];
    __m256i mins;  // [m0, m0, m1, m1, ..., m7, m7] int16
    float d, dmin;
  };
  using Acc = AccK;

  static void unpack_scales(const uint8_t* scales, half_t d, half_t dmin, Unpacked& u) {
    const __m128i sm = k4_scale_min_bytes(scales);  // [sc0..sc7, m0..m7] bytes
    // int16 pairs (sc_j, sc_j) in both 128-bit halves, j = 0..3 and 4..7; lane j % 4 of
    // each then broadcast by an immediate shuffle (no shuffle-control loads)
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    const __m256i lo = _mm256_unpacklo_epi16(sc, sc), hi = _mm256_unpackhi_epi16(sc, sc);
    splat_pairs8(lo, hi, u.sc);
    const __m256i m32 = _mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8));
    u.mins = _mm256_or_si256(m32, _mm256_slli_epi32(m32, 16));  // int16 pairs (m_j, m_j)
    u.d = half_to_float(d);
    u.dmin = half_to_float(dmin);
  }
  static void unpack_nibbles(const uint8_t* qs, Unpacked& u) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int p = 0; p < 4; ++p) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * p));
      u.q[2 * p] = _mm256_and_si256(v, m4);
      u.q[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
  }
  static void unpack(const WBlock& b, Unpacked& u) {
    unpack_nibbles(b.qs, u);
    unpack_scales(b.scales, b.d, b.dmin, u);
  }
  static Acc zero() { return {0.0f}; }
  // The block's two integer sums as int32 lanes (their lane sums are exact): s = the scaled
  // products, m = the mins against the bsums.
  static void ints(const Unpacked& u, const ABlock& a, __m256i& s, __m256i& m) {
    s = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j)
      s = _mm256_add_epi32(
          s, dot_scaled(u.q[j], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * j)), u.sc[j]));
    m = min_term(u, a);
  }
  static __m256i min_term(const Unpacked& u, const ABlock& a) {
    return _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), u.mins);
  }
  // The reference's float step for one block, given the lane sums of ints().
  static void step(const Unpacked& u, const ABlock& a, int s, int m, Acc& acc) {
    const float dall = a.d * u.d, dmin = a.d * u.dmin;
    acc.sum += dall * static_cast<float>(s) - dmin * static_cast<float>(m);
  }
  static void accumulate(const Unpacked& u, const ABlock& a, Acc& acc) {
    __m256i s, m;
    ints(u, a, s, m);
    step(u, a, hsum_epi32(s), hsum_epi32(m), acc);
  }
  // accumulate() for one activation row (decode), in lane 0 of acc: s and m reduced
  // together and scaled without leaving the vector registers, with step()'s float
  // operations on the same values (same bits). dw = [d, dmin] of the weight block.
  static void accumulate1(const Unpacked& u, __m128 dw, const ABlock& a, __m128& acc) {
    __m256i s, m;
    ints(u, a, s, m);
    const __m256i h = _mm256_hadd_epi32(s, m);
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q = _mm_hadd_epi32(q, q);                                                           // [s, m, s, m]
    const __m128 p = _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(a.d), dw), _mm_cvtepi32_ps(q));  // [dall s, dmin m]
    acc = _mm_add_ss(acc, _mm_sub_ss(p, _mm_movehdup_ps(p)));
  }
  // [d, dmin] of a Q4_K or Q5_K block (the same two leading fields).
  template <class B>
  static __m128 weight_scales(const B& b) {
    uint32_t v;
    std::memcpy(&v, &b.d, sizeof(v));  // d, dmin
    return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(v)));
  }
  static float reduce(const Acc& acc) { return acc.sum; }
};

struct DotQ5K : DotQ4K {
  using WBlock = BlockQ5_K;
  static void unpack(const WBlock& b, Unpacked& u) {
    unpack_nibbles(b.qs, u);
    // 5th bit of sub-block j's element l is bit j of qh[l].
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    const __m256i one = _mm256_set1_epi8(1);
    for (int j = 0; j < 8; ++j) {
      const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(qh, j), one);
      u.q[j] = _mm256_or_si256(u.q[j], _mm256_slli_epi16(bit, 4));
    }
    unpack_scales(b.scales, b.d, b.dmin, u);
  }
};

struct DotQ6K {
  using WBlock = BlockQ6_K;
  using ABlock = BlockQ8_K;
  static constexpr int kBlock = 256;
  struct Unpacked {
    __m256i q[8];   // elements 32i .. 32i + 31, unsigned 0..63
    __m256i sc[8];  // int16 lanes 0..7: scale 2i, lanes 8..15: scale 2i + 1
    __m256i sc16;   // the 16 scales, for the -32 offset through bsums
    float d;
  };
  using Acc = AccK;

  static void unpack(const WBlock& b, Unpacked& u) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), hi2 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
      // qh bits 2k..2k+1 of each byte moved to bits 4-5 (16-bit shifts; what crosses into
      // the neighbouring byte lands outside 0x30)
      u.q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), hi2));
      u.q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), hi2));
      u.q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, hi2));
      u.q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi16(qh, 2), hi2));
    }
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    u.sc16 = _mm256_cvtepi8_epi16(raw);
    // Register i: scale 2i in the low 128 bits, 2i + 1 in the high. The even scales widened
    // into the low half and the odd ones into the high half, as int16 pairs (sc, sc); lane
    // i % 4 of each half then broadcast by an immediate shuffle.
    const __m256i eo = _mm256_cvtepi8_epi16(
        _mm_shuffle_epi8(raw, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
    const __m256i lo = _mm256_unpacklo_epi16(eo, eo), hi = _mm256_unpackhi_epi16(eo, eo);
    splat_pairs8(lo, hi, u.sc);
    u.d = half_to_float(b.d);
  }
  static Acc zero() { return {0.0f}; }
  // As DotQ4K::ints; m = the -32 offset (32 x the scales against the bsums), subtracted.
  static void ints(const Unpacked& u, const ABlock& a, __m256i& s, __m256i& m) {
    s = _mm256_setzero_si256();
    for (int i = 0; i < 8; ++i)
      s = _mm256_add_epi32(
          s, dot_scaled(u.q[i], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * i)), u.sc[i]));
    m = min_term(u, a);
  }
  static __m256i min_term(const Unpacked& u, const ABlock& a) {
    return _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), u.sc16),
                             5);
  }
  static void step(const Unpacked& u, const ABlock& a, int s, int m, Acc& acc) {
    acc.sum += (a.d * u.d) * static_cast<float>(s - m);
  }
  static void accumulate(const Unpacked& u, const ABlock& a, Acc& acc) {
    __m256i s, m;
    ints(u, a, s, m);
    step(u, a, hsum_epi32(s), hsum_epi32(m), acc);
  }
  // As DotQ4K::accumulate1: step() on s - m reduced in the vector registers. dw = [d].
  static void accumulate1(const Unpacked& u, __m128 dw, const ABlock& a, __m128& acc) {
    __m256i s, m;
    ints(u, a, s, m);
    const __m256i h = _mm256_hadd_epi32(s, m);
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q = _mm_hadd_epi32(q, q);                          // [s, m, s, m]
    q = _mm_sub_epi32(q, _mm_shuffle_epi32(q, 0xB1));  // s - m
    acc = _mm_add_ss(acc, _mm_mul_ss(_mm_mul_ss(_mm_set_ss(a.d), dw), _mm_cvtepi32_ps(q)));
  }
  static __m128 weight_scales(const WBlock& b) {
    uint16_t v;
    std::memcpy(&v, &b.d, sizeof(v));
    return _mm_cvtph_ps(_mm_cvtsi32_si128(v));
  }
  static float reduce(const Acc& acc) { return acc.sum; }
};

// 32-blocks against Q8_0 activations: |w| x (a * sign(w)), exact in int16 pairs.
struct Dot32Base {
  using ABlock = BlockQ8_0;
  static constexpr int kBlock = 32;
  struct Unpacked {
    __m256i w;
    __m256i absw;
    float d;
  };
  using Acc = AccK;  // [QUANT_EXACT]: the reference's running float sum
  static Acc zero() { return {0.0f}; }
  template <class WBlock>
  static float scale(const WBlock& b) {
    return half_to_float(b.d);
  }
  static void finish_unpack(__m256i w, half_t d, Unpacked& u) {
    u.w = w;
    u.absw = _mm256_abs_epi8(w);
    u.d = half_to_float(d);
  }
  static void accumulate(const Unpacked& u, const ABlock& a, Acc& acc) {
    const __m256i s = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)), u.w);
    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(u.absw, s), _mm256_set1_epi16(1));
    acc.sum += static_cast<float>(hsum_epi32(p)) * (u.d * half_to_float(a.d));
  }
  static float reduce(const Acc& acc) { return acc.sum; }
};

inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}

// Bit j of the 32-bit mask -> byte j = 0x10 (Q5_0's 5th bits).
inline __m256i high_bits32(const uint8_t* qh4) {
  uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), shuf);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// weights(b): the block's 32 signed quants (what unpack multiplies), for the 8-row tile.
struct DotQ4_0 : Dot32Base {
  using WBlock = BlockQ4_0;
  static __m256i weights(const WBlock& b) { return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8)); }
  static void unpack(const WBlock& b, Unpacked& u) { finish_unpack(weights(b), b.d, u); }
};
struct DotQ5_0 : Dot32Base {
  using WBlock = BlockQ5_0;
  static __m256i weights(const WBlock& b) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b.qs), high_bits32(b.qh)), _mm256_set1_epi8(16));
  }
  static void unpack(const WBlock& b, Unpacked& u) { finish_unpack(weights(b), b.d, u); }
};
struct DotQ8_0 : Dot32Base {
  using WBlock = BlockQ8_0;
  static __m256i weights(const WBlock& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
  static void unpack(const WBlock& b, Unpacked& u) { finish_unpack(weights(b), b.d, u); }
};

}  // namespace ds::avx2
