// The K-quant panels of the AVX-512 matmul (matmul_panel.cpp for rows in the GGUF layout,
// matmul_packed.cpp for rows repacked at load, kernels/quant/repack.h): 16 weight rows per
// superblock in registers whose 16 int32 lanes are the 16 rows, and the per-token
// accumulation. Internal to kernels/avx512 (namespace ds::avx512, [ISA_ODR]).
#pragma once
#include "kernels/avx512/intrinsics.h"

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/repack.h"

namespace ds::avx512 {

constexpr int kPanelToks = 4;  // activation rows per pass over an unpacked panel
// K-quants: 8 rows per pass first, 8 independent dpbusd chains (4 left the chains
// latency-bound: measured 1.3x on a 48-token Q4_K expert product), then 4, then single rows.
constexpr int kPanelK4Toks = 8;

// One superblock of 16 rows. Sub-block j (32 elements for Q4_K/Q5_K) is 8 groups of 4
// quants: q[j][g] lane r = row r's quants 4g..4g+3 of sub-block j (u8).
struct PanelK4 {
  __m512i q[8][8];
  __m512i sc[8];   // int32 scale of sub-block j per row
  __m512i mp[8];   // int16 pairs (m_j, m_j) per row, against the bsums pair (2j, 2j + 1)
  __m512 d, dmin;  // per row
};

// The fp16 in the low / high half of each int32 lane, as float.
inline __m512 half_lo(__m512i v) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_and_si512(v, _mm512_set1_epi32(0xFFFF))));
}
inline __m512 half_hi(__m512i v) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
}

inline __m512i gather_dwords(const uint8_t* base, __m512i vidx) {
  return _mm512_i32gather_epi32(vidx, base, 1);
}

// Byte offsets of a panel's 16 rows, as gather indices.
inline __m512i row_offsets(size_t row_stride) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(static_cast<int>(row_stride)));
}

// The packed panel holding rows [r0, r0 + 16) (r0 a multiple of 16), or null when the
// matrix has no packed copy: panel p lies where its rows lie in the original layout.
inline const uint8_t* packed_panel(const MatmulArgs& m, int64_t r0) {
  return m.w_panels ? static_cast<const uint8_t*>(m.w_panels) + static_cast<size_t>(r0) * m.w_row_stride : nullptr;
}

// The reference's float step of one Q4_K/Q5_K/Q2_K block, one lane per row
// ([KQUANT_EXACT]): acc + ((ad * d) * sumi - (ad * dmin) * summ).
inline __m512 k4_block_step(__m512 acc, float ad, __m512 d, __m512 dmin_, __m512i sumi, __m512i summ) {
  const __m512 a = _mm512_set1_ps(ad);
  const __m512 dall = _mm512_mul_ps(a, d), dmin = _mm512_mul_ps(a, dmin_);
  return _mm512_add_ps(
      acc, _mm512_sub_ps(_mm512_mul_ps(dall, _mm512_cvtepi32_ps(sumi)), _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summ))));
}

// In place: r[i] lane j <-> r[j] lane i (16 x 16 dwords): 32-bit, then 64-bit unpacks
// inside 128-bit lanes, then 128-bit lane shuffles.
inline void transpose16(__m512i* r) {
  __m512i t[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  __m512i u[16];  // u[4k + m], 128-bit lane L: rows 4k..4k+3 of column 4L + m
  for (int k = 0; k < 4; ++k) {
    u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    const __m512i x01 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x44),
                  y01 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x44);
    const __m512i x23 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xEE),
                  y23 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xEE);
    r[m] = _mm512_shuffle_i32x4(x01, y01, 0x88);
    r[4 + m] = _mm512_shuffle_i32x4(x01, y01, 0xDD);
    r[8 + m] = _mm512_shuffle_i32x4(x23, y23, 0x88);
    r[12 + m] = _mm512_shuffle_i32x4(x23, y23, 0xDD);
  }
}

// out[d] lane r = dword d of the 64 bytes at row r's `src` (rows `stride` bytes apart):
// 16 loads and one transpose instead of 16 gathers.
inline void load_transposed(const uint8_t* src, size_t stride, __m512i* out) {
  for (int r = 0; r < 16; ++r) out[r] = _mm512_loadu_si512(src + r * stride);
  transpose16(out);
}

// out[k] lane r = dword k (k < 4) of the 16 bytes at row r's `src` (rows `stride` bytes
// apart): 16 16-byte loads, 4 rows per register, then two-source dword permutes; replaces
// 4 gathers (measured: the gathers were 10% of an 8-sequence decode step).
inline void load_dwords4(const uint8_t* src, size_t stride, __m512i* out) {
  __m512i z[4];  // z[g] dword 4i + k = row 4g + i, dword k
  for (int g = 0; g < 4; ++g) {
    const uint8_t* p = src + 4 * g * stride;
    __m512i x = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    x = _mm512_inserti32x4(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + stride)), 1);
    x = _mm512_inserti32x4(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * stride)), 2);
    z[g] = _mm512_inserti32x4(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3 * stride)), 3);
  }
  for (int k = 0; k < 4; ++k) {
    // lanes 0-3: dword k of the 4 rows of the first source, lanes 4-7: of the second
    const __m512i idx =
        _mm512_setr_epi32(k, 4 + k, 8 + k, 12 + k, 16 + k, 20 + k, 24 + k, 28 + k, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i lo = _mm512_permutex2var_epi32(z[0], idx, z[1]), hi = _mm512_permutex2var_epi32(z[2], idx, z[3]);
    out[k] = _mm512_shuffle_i64x2(lo, hi, 0x44);
  }
}

inline __m512i byte_of(__m512i v, int k) {
  return _mm512_and_si512(_mm512_srli_epi32(v, 8 * k), _mm512_set1_epi32(0xFF));
}

// Software prefetch of bytes [p, p + len) of the 16 rows (`stride` apart), issued one
// block ahead of the multiply: the rows are 16 separate streams, and an expert's weights
// come from memory once per step (measured: a 48-token Q4_K expert product ran ~15% slower
// on matrices cycled from memory than on one hot in cache).
inline void prefetch_rows(const uint8_t* p, size_t stride, int len) {
  for (int r = 0; r < 16; ++r) {
    const auto* q = reinterpret_cast<const char*>(p + r * stride);
    for (int o = 0; o < len; o += 64) _mm_prefetch(q + o, _MM_HINT_T0);
    if (len > 1) _mm_prefetch(q + len - 1, _MM_HINT_T0);
  }
}

// Scales, mins and block scales of 16 rows (SPEC.md "Block formats" scales formula, four
// sub-blocks per 32-bit word, vectorized across rows) from the block heads h[k] lane r =
// dword k of row r's first 16 bytes (d|dmin, scales[0..3], scales[4..7], scales[8..11]).
inline void decode_scales_k4(const __m512i* h, PanelK4& p) {
  const __m512i dd = h[0], w0 = h[1], w1 = h[2], w2 = h[3];
  p.d = half_lo(dd);
  p.dmin = half_hi(dd);
  const __m512i m6 = _mm512_set1_epi32(0x3F3F3F3F), m4 = _mm512_set1_epi32(0x0F0F0F0F),
                m2 = _mm512_set1_epi32(0x03030303);
  const __m512i sc03 = _mm512_and_si512(w0, m6), m03 = _mm512_and_si512(w1, m6);
  const __m512i sc47 =
      _mm512_or_si512(_mm512_and_si512(w2, m4), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), m2), 4));
  const __m512i m47 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), m4),
                                      _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), m2), 4));
  for (int j = 0; j < 4; ++j) {
    p.sc[j] = byte_of(sc03, j);
    p.sc[j + 4] = byte_of(sc47, j);
    const __m512i a = byte_of(m03, j), b = byte_of(m47, j);
    p.mp[j] = _mm512_or_si512(a, _mm512_slli_epi32(a, 16));
    p.mp[j + 4] = _mm512_or_si512(b, _mm512_slli_epi32(b, 16));
  }
}

// Quants from V(dw) lane r = dword dw of row r's qs (4 pairs of sub-blocks, 32 bytes each:
// low nibbles sub-block 2p, high 2p + 1) and, for Q5_K, H(g) lane r = dword g of row r's qh
// (bit j of byte l is the 5th bit of sub-block j's element l). V and H load on demand (a
// local array filled from memory compiled to a rep movs copy).
// Quant word q of sub-block j with its 5th bit from qh word h (bit j of each byte).
inline __m512i with_bit5(__m512i q, __m512i h, int j) {
  return _mm512_or_si512(q, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, j), _mm512_set1_epi8(1)), 4));
}

template <bool kHasQh, class V, class H>
[[gnu::always_inline]] inline void decode_quants_k4(V v, H h, PanelK4& p) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int dw = 0; dw < 32; ++dw) {
    const int pair = dw / 8, g = dw % 8;
    const __m512i x = v(dw);
    p.q[2 * pair][g] = _mm512_and_si512(x, m4);
    p.q[2 * pair + 1][g] = _mm512_and_si512(_mm512_srli_epi32(x, 4), m4);
  }
  if constexpr (kHasQh) {
    for (int g = 0; g < 8; ++g) {
      const __m512i hg = h(g);
      for (int j = 0; j < 8; ++j) p.q[j][g] = with_bit5(p.q[j][g], hg, j);
    }
  }
}

// A Q4_K/Q5_K superblock of 16 rows in the GGUF layout (row0: row 0's block, rows `stride`
// bytes apart) ...
template <class WB, bool kHasQh>
inline void unpack_k4_rows(const uint8_t* row0, size_t stride, PanelK4& p) {
  static_assert(offsetof(WB, d) == 0 && offsetof(WB, scales) == 4);
  __m512i h[4], v[32], qh[16];
  load_dwords4(row0, stride, h);
  decode_scales_k4(h, p);
  load_transposed(row0 + offsetof(WB, qs), stride, v);
  load_transposed(row0 + offsetof(WB, qs) + 64, stride, v + 16);
  if constexpr (kHasQh) load_transposed(row0 + offsetof(WB, qh), stride, qh);  // 32 bytes of qh, 32 unused
  decode_quants_k4<kHasQh>([&](int k) { return v[k]; }, [&](int k) { return qh[k]; }, p);
}

// ... or from its packed form (kernels/quant/repack.h): dword k of row r at 64 * k + 4 * r.
// Q4_K: d|dmin, scales[12], qs[128]; Q5_K: d|dmin, scales[12], qh[32], qs[128]: the packed
// qh lines start at kPackedK4Qh, the qs lines at kPackedK4Qs<kHasQh>.
constexpr size_t kPackedK4Qh = 16 / 4 * 64;
template <bool kHasQh>
constexpr size_t kPackedK4Qs = (kHasQh ? 48 : 16) / 4 * 64;

// Quant line g of sub-block pair `pair` of a packed Q4_K/Q5_K superblock: the u8 groups g of
// sub-blocks 2 pair (lo) and 2 pair + 1 (hi), the 5th bits added for Q5_K.
template <bool kHasQh>
[[gnu::always_inline]] inline void packed_k4_line(const uint8_t* blk, int pair, int g, __m512i& lo, __m512i& hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i x = _mm512_loadu_si512(blk + kPackedK4Qs<kHasQh> + 64 * (8 * pair + g));
  lo = _mm512_and_si512(x, m4);
  hi = _mm512_and_si512(_mm512_srli_epi32(x, 4), m4);
  if constexpr (kHasQh) {
    const __m512i hg = _mm512_loadu_si512(blk + kPackedK4Qh + 64 * g);
    lo = with_bit5(lo, hg, 2 * pair);
    hi = with_bit5(hi, hg, 2 * pair + 1);
  }
}

// Scales, mins and block scales of a packed Q4_K/Q5_K superblock's 16 rows (its first 4 lines).
inline void packed_k4_scales(const uint8_t* blk, PanelK4& p) {
  const __m512i h[4] = {_mm512_loadu_si512(blk), _mm512_loadu_si512(blk + 64), _mm512_loadu_si512(blk + 128),
                        _mm512_loadu_si512(blk + 192)};
  decode_scales_k4(h, p);
}

template <class WB, bool kHasQh>
inline void unpack_k4_packed(const uint8_t* blk, PanelK4& p) {
  packed_k4_scales(blk, p);
  constexpr size_t kQh = kPackedK4Qh, kQs = kPackedK4Qs<kHasQh>;
  static_assert(offsetof(WB, qs) / 4 * 64 == kQs);
  decode_quants_k4<kHasQh>([&](int k) { return _mm512_loadu_si512(blk + kQs + 64 * k); },
                           [&](int k) { return _mm512_loadu_si512(blk + kQh + 64 * k); }, p);
}

// The 4 bytes at p (4 activation quants, or a pair of int16 bsums) in every int32 lane.
inline __m512i bcast_dword(const void* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// dpbusd / dpwssd of acc with the 4 bytes at p in every int32 lane, read by the
// instruction's own embedded broadcast ({1to16}). GCC emits _mm512_set1_epi32 of a loaded
// dword as a separate vpbroadcastd even where it feeds one dpbusd; folding it takes one
// of every three vector instructions out of the single-token kernels, which lets more of
// the weight stream be in flight (packed Q4_K 1536x8960 from memory, one token: 1.04-1.16x).
[[gnu::always_inline]] inline __m512i dpbusd_bcast(__m512i acc, __m512i u8, const void* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u8), "m"(*static_cast<const uint8_t(*)[4]>(p)));
  return acc;
}
[[gnu::always_inline]] inline __m512i dpwssd_bcast(__m512i acc, __m512i s16, const void* p) {
  __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(s16), "m"(*static_cast<const uint8_t(*)[4]>(p)));
  return acc;
}

// sumi[t] += sum over sub-blocks j < J of sc[j] * dot(q[j], sub-block j of token t), lane r =
// row r: G groups of 4 quants per sub-block, kSubBytes activation bytes per sub-block.
template <int NT, int J, int G, int kSubBytes, class Panel>
[[gnu::always_inline]] inline void scaled_sub_block_sums(const Panel& p, const BlockQ8_K* const* a, __m512i* sumi) {
  for (int j = 0; j < J; ++j) {
    __m512i s[NT];
    for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_si512();
    for (int g = 0; g < G; ++g)
      for (int t = 0; t < NT; ++t) s[t] = dpbusd_bcast(s[t], p.q[j][g], a[t]->qs + kSubBytes * j + 4 * g);
    for (int t = 0; t < NT; ++t) sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(s[t], p.sc[j]));
  }
}

// out[t] = sum over k < 8 of the int16 pair products of w[k] with bsums (2k, 2k + 1) of token t.
template <int NT>
[[gnu::always_inline]] inline void bsum_pair_sums(const __m512i* w, const BlockQ8_K* const* a, __m512i* out) {
  for (int t = 0; t < NT; ++t) out[t] = _mm512_setzero_si512();
  for (int k = 0; k < 8; ++k)
    for (int t = 0; t < NT; ++t) out[t] = dpwssd_bcast(out[t], w[k], a[t]->bsums + 2 * k);
}

// acc[t] (lane r) += reference float step for rows x tokens t < NT of one superblock.
template <int NT>
[[gnu::always_inline]] inline void accumulate_k4(const PanelK4& p, const BlockQ8_K* const* a, __m512* acc) {
  __m512i sumi[NT], summ[NT];
  for (int t = 0; t < NT; ++t) sumi[t] = _mm512_setzero_si512();
  scaled_sub_block_sums<NT, 8, 8, 32>(p, a, sumi);
  bsum_pair_sums<NT>(p.mp, a, summ);
  for (int t = 0; t < NT; ++t) acc[t] = k4_block_step(acc[t], a[t]->d, p.d, p.dmin, sumi[t], summ[t]);
}

// Two panels (32 rows) at once: each activation broadcast feeds both panels' dpbusd, so a
// dpbusd needs 0.75 loads instead of 1.125 (4 tokens x 2 panels; 8 chains as with 8 tokens
// x 1 panel). Measured, Q4_K 2048x1408, 1 thread: 256 tokens 1.2x, 48 tokens ~1.07x.
template <int NT>
[[gnu::always_inline]] inline void accumulate_k4x2(const PanelK4* p, const BlockQ8_K* const* a, __m512* acc0,
                                                   __m512* acc1) {
  __m512i sumi[2][NT], summ[2][NT];
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < NT; ++t) sumi[r][t] = summ[r][t] = _mm512_setzero_si512();
  for (int j = 0; j < 8; ++j) {
    __m512i s[2][NT];
    for (int r = 0; r < 2; ++r)
      for (int t = 0; t < NT; ++t) s[r][t] = _mm512_setzero_si512();
    for (int g = 0; g < 8; ++g) {
      __m512i w0 = p[0].q[j][g], w1 = p[1].q[j][g];
      __asm__("" : "+v"(w0), "+v"(w1));
      for (int t = 0; t < NT; ++t) {
        __m512i b = bcast_dword(a[t]->qs + 32 * j + 4 * g);
        __asm__("" : "+v"(b));
        s[0][t] = _mm512_dpbusd_epi32(s[0][t], w0, b);
        s[1][t] = _mm512_dpbusd_epi32(s[1][t], w1, b);
      }
    }
    for (int r = 0; r < 2; ++r)
      for (int t = 0; t < NT; ++t) sumi[r][t] = _mm512_add_epi32(sumi[r][t], _mm512_mullo_epi32(s[r][t], p[r].sc[j]));
  }
  for (int j = 0; j < 8; ++j)
    for (int t = 0; t < NT; ++t) {
      const __m512i bb = bcast_dword(a[t]->bsums + 2 * j);
      for (int r = 0; r < 2; ++r) summ[r][t] = _mm512_dpwssd_epi32(summ[r][t], bb, p[r].mp[j]);
    }
  for (int t = 0; t < NT; ++t) {
    acc0[t] = k4_block_step(acc0[t], a[t]->d, p[0].d, p[0].dmin, sumi[0][t], summ[0][t]);
    acc1[t] = k4_block_step(acc1[t], a[t]->d, p[1].d, p[1].dmin, sumi[1][t], summ[1][t]);
  }
}

// Q6_K: 16 sub-blocks of 16 = 4 groups of 4 quants (u8 0..63; the -32 goes through the
// bsums), 16 signed scales.
struct PanelQ6K {
  __m512i q[16][4];
  __m512i sc[16];  // int32 scale per row
  __m512i sp[8];   // int16 pairs (sc_2k, sc_2k+1) per row, against the bsums pair (2k, 2k + 1)
  __m512 d;
};

// Element e = 128n + 32qq + l: low (qq < 2) or high nibble of ql[64n + 32(qq % 2) + l],
// bits 2qq..2qq+1 of qh[32n + l] (the reference's dequantize order). ql(k), qh(k), scw[k]
// lane r = dword k of row r's ql, qh, scales (ql, qh load on demand); d lane r = row r's d.
// Sub-block j's quant word from ql word l and qh word h (qq = (j % 8) / 2), u8 0..63.
inline __m512i q6k_quant(__m512i l, __m512i h, int qq) {
  const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(l, 4 * (qq / 2)), _mm512_set1_epi8(0x0F));
  const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(h, 2 * qq), _mm512_set1_epi8(0x03));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4));
}
// Signed scale byte i of each lane's scales dword, as int32.
inline __m512i q6k_scale(__m512i scw, int i) {
  return _mm512_srai_epi32(_mm512_slli_epi32(scw, 24 - 8 * i), 24);
}
// Two int32 scales as the int16 pair (lo, hi) of each lane.
inline __m512i scale_pair(__m512i lo, __m512i hi) {
  return _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(hi, 16));
}

// The scales of a Q6_K panel from its scales dwords scw[k] (bytes 4k..4k+3 of each row).
inline void decode_q6k_scales(const __m512i* scw, PanelQ6K& p) {
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 4; ++i) p.sc[4 * k + i] = q6k_scale(scw[k], i);
  for (int k = 0; k < 8; ++k) p.sp[k] = scale_pair(p.sc[2 * k], p.sc[2 * k + 1]);
}

template <class QL, class QH>
[[gnu::always_inline]] inline void decode_q6k(QL ql, QH qh, const __m512i* scw, __m512 d, PanelQ6K& p) {
  // Unrolled (1536x8960 from memory, one thread, 3 alternations: 8 tokens 737/722/728 ->
  // 707/707/695 us, 4 tokens unchanged); the same on decode_quants_k4 made Q4_K ~8% slower.
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {
    const int n = j / 8, qq = (j % 8) / 2, l0 = 16 * (j % 2);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g)
      p.q[j][g] = q6k_quant(ql((64 * n + 32 * (qq % 2) + l0) / 4 + g), qh((32 * n + l0) / 4 + g), qq);
  }
  decode_q6k_scales(scw, p);
  p.d = d;
}

inline void unpack_q6k_rows(const uint8_t* row0, size_t stride, __m512i vidx, PanelQ6K& p) {
  __m512i ql[32], qh[16], scw[4];
  load_transposed(row0 + offsetof(BlockQ6_K, ql), stride, ql);
  load_transposed(row0 + offsetof(BlockQ6_K, ql) + 64, stride, ql + 16);
  load_transposed(row0 + offsetof(BlockQ6_K, qh), stride, qh);
  load_dwords4(row0 + offsetof(BlockQ6_K, scales), stride, scw);
  // d sits in the block's last two bytes: gather the dword ending there (in bounds).
  const __m512i dd = gather_dwords(row0 + offsetof(BlockQ6_K, d) - 2, vidx);
  decode_q6k([&](int k) { return ql[k]; }, [&](int k) { return qh[k]; }, scw, half_hi(dd), p);
}

// The 16 rows' block scales d of a packed Q6_K block (after its 52 dwords).
inline __m512 q6k_block_d(const uint8_t* blk) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * 52)));
}

// Packed (repack.h): sub-block j's quants in lines 3j..3j+2 (re-encoded, see below), the
// scales dwords in lines 48-51, then the 16 rows' d (2 bytes each).
//
// Sub-block j's four quant words (w[g] lane r = row r's elements 16j + 4g .. 16j + 4g + 3,
// u8 0..63): word g < 3 is the low six bits of line 3j + g, and bits 2k..2k+1 of word 3
// are bits 6-7 of line 3j + k. Nine operations for four words; the file's ql/qh split
// took 4-6 per word.
[[gnu::always_inline]] inline void q6k_packed_words(const uint8_t* blk, int j, __m512i* w) {
  const __m512i six = _mm512_set1_epi8(0x3F);
  const __m512i l0 = _mm512_loadu_si512(blk + 64 * (3 * j)), l1 = _mm512_loadu_si512(blk + 64 * (3 * j + 1)),
                l2 = _mm512_loadu_si512(blk + 64 * (3 * j + 2));
  w[0] = _mm512_and_si512(l0, six);
  w[1] = _mm512_and_si512(l1, six);
  w[2] = _mm512_and_si512(l2, six);
  // Bits 0-1 from l0 >> 6, 2-3 from l1 >> 4, 4-5 from l2 >> 2 (dword shifts: the bits a
  // byte gets from its neighbour are masked off); 0xCA = c0 ? c1 : c2 per bit.
  const __m512i lo =
      _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x03), _mm512_srli_epi32(l0, 6), _mm512_srli_epi32(l1, 4), 0xCA);
  const __m512i mid = _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x0F), lo, _mm512_srli_epi32(l2, 2), 0xCA);
  w[3] = _mm512_and_si512(mid, six);
}

inline __m512i q6k_packed_scales(const uint8_t* blk, int k) {
  return _mm512_loadu_si512(blk + 64 * (48 + k));
}

inline void unpack_q6k_packed(const uint8_t* blk, PanelQ6K& p) {
  static_assert(offsetof(BlockQ6_K, scales) == 192 && offsetof(BlockQ6_K, d) == 208);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) q6k_packed_words(blk, j, p.q[j]);
  const __m512i scw[4] = {q6k_packed_scales(blk, 0), q6k_packed_scales(blk, 1), q6k_packed_scales(blk, 2),
                          q6k_packed_scales(blk, 3)};
  decode_q6k_scales(scw, p);
  p.d = q6k_block_d(blk);
}

// The reference's float step of one Q6_K (kShift 5) or Q3_K (kShift 2) block, one lane per
// row ([KQUANT_EXACT]): sumi = the scaled sub-block sums of the unsigned quants, off =
// their scaled bsums (the -32 or -4 offset, applied as off << kShift), d = the rows' block
// scales, ad = the token's d.
template <int kShift = 5>
inline __m512 q6k_block_step(__m512 acc, float ad, __m512 d, __m512i sumi, __m512i off) {
  const __m512i si = _mm512_sub_epi32(sumi, _mm512_slli_epi32(off, kShift));
  const __m512 dall = _mm512_mul_ps(_mm512_set1_ps(ad), d);
  return _mm512_add_ps(acc, _mm512_mul_ps(dall, _mm512_cvtepi32_ps(si)));
}

template <int NT, int kShift = 5>
[[gnu::always_inline]] inline void accumulate_q6k(const PanelQ6K& p, const BlockQ8_K* const* a, __m512* acc) {
  __m512i sumi[NT], off[NT];
  for (int t = 0; t < NT; ++t) sumi[t] = _mm512_setzero_si512();
  scaled_sub_block_sums<NT, 16, 4, 16>(p, a, sumi);
  bsum_pair_sums<NT>(p.sp, a, off);
  for (int t = 0; t < NT; ++t) acc[t] = q6k_block_step<kShift>(acc[t], a[t]->d, p.d, sumi[t], off[t]);
}

// Q2_K and Q3_K from the GGUF layout (no packed form). Element e = 128n + 32s + l is bits
// 2s..2s+1 of qs[32n + l]; sub-block j (16 elements) is n = j / 8, s = (j % 8) / 2, l from
// 16 (j % 2): its group g is qs dword (32n + 16 (j % 2)) / 4 + g shifted by 2s. Q3_K's third
// bit is bit 4n + s of hmask[l] (hmask dword 4 (j % 2) + g), kept as q + 4 (0..7) with the
// -4 through the bsums; its panel is a PanelQ6K (16 signed scales, sp pairs for the offset).
inline __m512i k23_low_bits(__m512i qs_dw, int s) {
  return _mm512_and_si512(_mm512_srli_epi32(qs_dw, 2 * s), _mm512_set1_epi8(0x03));
}

// Q2_K: 4-bit scale (low nibble) and 4-bit min (high nibble) per sub-block; the mins go
// through the bsums as Q4_K's do, then the reference's dall * sumi - dmin * summ.
struct PanelQ2K {
  __m512i q[16][4];
  __m512i sc[16];  // int32 scale per row
  __m512i mp[8];   // int16 pairs (m_2k, m_2k+1) per row, against the bsums pair (2k, 2k + 1)
  __m512 d, dmin;
};

// Q2_K scales and mins from the scales dwords scw[k] (bytes 4k..4k+3 of each row), and d,
// dmin from dd (d | dmin << 16 per row).
inline void decode_q2k_scales(const __m512i* scw, __m512i dd, PanelQ2K& p) {
  const __m512i m4 = _mm512_set1_epi32(0x0F);
  __m512i mins[16];
  for (int j = 0; j < 16; ++j) {
    p.sc[j] = _mm512_and_si512(_mm512_srli_epi32(scw[j / 4], 8 * (j % 4)), m4);
    mins[j] = _mm512_and_si512(_mm512_srli_epi32(scw[j / 4], 8 * (j % 4) + 4), m4);
  }
  for (int k = 0; k < 8; ++k) p.mp[k] = _mm512_or_si512(mins[2 * k], _mm512_slli_epi32(mins[2 * k + 1], 16));
  p.d = half_lo(dd);
  p.dmin = half_hi(dd);
}

// Sub-block j's group g from the qs dwords QS(k) (the Q2_K / Q3_K low bits).
template <class QS>
[[gnu::always_inline]] inline __m512i k23_group(QS qs, int j, int g) {
  const int n = j / 8, s = (j % 8) / 2, dw0 = (32 * n + 16 * (j % 2)) / 4;
  return k23_low_bits(qs(dw0 + g), s);
}
// Q3_K: group g of sub-block j with its third bit from the hmask dwords HM(k).
template <class QS, class HM>
[[gnu::always_inline]] inline __m512i k3_group(QS qs, HM hm, int j, int g) {
  const int n = j / 8, s = (j % 8) / 2;
  const __m512i hbit = _mm512_and_si512(_mm512_srli_epi32(hm(4 * (j % 2) + g), 4 * n + s), _mm512_set1_epi8(1));
  return _mm512_or_si512(k23_group(qs, j, g), _mm512_slli_epi32(hbit, 2));
}

inline void unpack_q2k_rows(const uint8_t* row0, size_t stride, __m512i vidx, PanelQ2K& p) {
  static_assert(offsetof(BlockQ2_K, qs) == 16 && offsetof(BlockQ2_K, d) == 80 && sizeof(BlockQ2_K) == 84);
  __m512i qs[16], scw[4];
  load_transposed(row0 + offsetof(BlockQ2_K, qs), stride, qs);
  load_dwords4(row0, stride, scw);  // scales[16]
  for (int j = 0; j < 16; ++j)
    for (int g = 0; g < 4; ++g) p.q[j][g] = k23_group([&](int k) { return qs[k]; }, j, g);
  decode_q2k_scales(scw, gather_dwords(row0 + offsetof(BlockQ2_K, d), vidx), p);
}

// Packed (repack.h, 21 dwords per row): lines 0-3 scales, 4-19 qs, 20 d | dmin.
constexpr int kPackedQ2kQs = 4, kPackedQ2kD = 20;
// Scales, mins, d and dmin of a packed Q2_K superblock's 16 rows.
inline void packed_q2k_scales(const uint8_t* blk, PanelQ2K& p) {
  const __m512i scw[4] = {_mm512_loadu_si512(blk), _mm512_loadu_si512(blk + 64), _mm512_loadu_si512(blk + 128),
                          _mm512_loadu_si512(blk + 192)};
  decode_q2k_scales(scw, _mm512_loadu_si512(blk + 64 * kPackedQ2kD), p);
}
inline void unpack_q2k_packed(const uint8_t* blk, PanelQ2K& p) {
  const auto qs = [&](int k) { return _mm512_loadu_si512(blk + 64 * (kPackedQ2kQs + k)); };
  for (int j = 0; j < 16; ++j)
    for (int g = 0; g < 4; ++g) p.q[j][g] = k23_group(qs, j, g);
  packed_q2k_scales(blk, p);
}

template <int NT>
[[gnu::always_inline]] inline void accumulate_q2k(const PanelQ2K& p, const BlockQ8_K* const* a, __m512* acc) {
  __m512i sumi[NT], summ[NT];
  for (int t = 0; t < NT; ++t) sumi[t] = _mm512_setzero_si512();
  scaled_sub_block_sums<NT, 16, 4, 16>(p, a, sumi);
  bsum_pair_sums<NT>(p.mp, a, summ);
  for (int t = 0; t < NT; ++t) acc[t] = k4_block_step(acc[t], a[t]->d, p.d, p.dmin, sumi[t], summ[t]);
}

// Q3_K scales (kernels/ref q3_k_scales), per row from the scales dwords w0 (bytes 0-3), w1
// (4-7), w2 (8-11): low 4 bits from the low (j < 8) or high (j >= 8) nibble of byte j % 8,
// high 2 bits from byte 8 + j % 4 at bit 2 (j / 4); minus 32.
inline void decode_q3k_scales(__m512i w0, __m512i w1, __m512i w2, PanelQ6K& p) {
  const __m512i w01[2] = {w0, w1};
  for (int j = 0; j < 16; ++j) {
    const __m512i lo =
        _mm512_and_si512(_mm512_srli_epi32(w01[(j % 8) / 4], 8 * (j % 4) + 4 * (j / 8)), _mm512_set1_epi32(0x0F));
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(w2, 8 * (j % 4) + 2 * (j / 4)), _mm512_set1_epi32(0x03));
    p.sc[j] = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
  }
  for (int k = 0; k < 8; ++k) p.sp[k] = scale_pair(p.sc[2 * k], p.sc[2 * k + 1]);
}

inline void unpack_q3k_rows(const uint8_t* row0, size_t stride, __m512i vidx, PanelQ6K& p) {
  static_assert(offsetof(BlockQ3_K, qs) == 32 && offsetof(BlockQ3_K, scales) == 96 && offsetof(BlockQ3_K, d) == 108);
  __m512i qs[16], hm[16], w[4];
  load_transposed(row0 + offsetof(BlockQ3_K, qs), stride, qs);
  load_transposed(row0, stride, hm);  // hmask[32], then the first 32 qs bytes (unused)
  // Bytes 92-107: the last qs dword (unused), then scales[0..11].
  load_dwords4(row0 + offsetof(BlockQ3_K, scales) - 4, stride, w);
  for (int j = 0; j < 16; ++j)
    for (int g = 0; g < 4; ++g) p.q[j][g] = k3_group([&](int k) { return qs[k]; }, [&](int k) { return hm[k]; }, j, g);
  decode_q3k_scales(w[1], w[2], w[3], p);
  // d sits in the block's last two bytes: gather the dword ending there (in bounds).
  const __m512i dd = gather_dwords(row0 + offsetof(BlockQ3_K, d) - 2, vidx);
  p.d = half_hi(dd);
}

// Packed (repack.h, 27 dwords and 2 bytes per row): lines 0-7 hmask, 8-23 qs, 24-26 scales,
// then the 16 rows' d (2 bytes each).
constexpr int kPackedQ3kQs = 8, kPackedQ3kScales = 24, kPackedQ3kD = 27;
// Scales (and their pairs) and d of a packed Q3_K superblock's 16 rows.
inline void packed_q3k_scales(const uint8_t* blk, PanelQ6K& p) {
  const auto line = [&](int k) { return _mm512_loadu_si512(blk + 64 * k); };
  decode_q3k_scales(line(kPackedQ3kScales), line(kPackedQ3kScales + 1), line(kPackedQ3kScales + 2), p);
  p.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * kPackedQ3kD)));
}
inline void unpack_q3k_packed(const uint8_t* blk, PanelQ6K& p) {
  const auto line = [&](int k) { return _mm512_loadu_si512(blk + 64 * k); };
  for (int j = 0; j < 16; ++j)
    for (int g = 0; g < 4; ++g) p.q[j][g] = k3_group([&](int k) { return line(kPackedQ3kQs + k); }, line, j, g);
  packed_q3k_scales(blk, p);
}

// 32-blocks (matmul_panel.cpp, matmul_packed.cpp). Masks of the elements whose 5th bit is
// set (Q5 types): bit j of the row's 32-bit qh is element j's; group g's bits 4g..4g+3 sit
// in byte g / 2 of the dword, which a byte shuffle copies to the group's four bytes, each
// then tested against its own bit.
[[gnu::always_inline]] inline void fifth_bit_masks(__m512i h, __mmask64* set) {
  const __m512i lane_base = _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0);  // dword d: byte 4d
  for (int g = 0; g < 8; ++g) {
    const __m512i rep = _mm512_shuffle_epi8(h, _mm512_add_epi8(lane_base, _mm512_set1_epi8(static_cast<char>(g / 2))));
    const int sh = 4 * (g % 2);
    set[g] = _mm512_test_epi8_mask(rep, _mm512_set1_epi32(static_cast<int>(0x08040201u << sh)));
  }
}

}  // namespace ds::avx512
