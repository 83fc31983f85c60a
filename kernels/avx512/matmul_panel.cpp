// AVX-512 VNNI "panel" matmul for the quantized types (K-quants and 32-blocks) when many
// activation rows share the weights (prefill): 16 weight rows are unpacked per superblock into registers whose 16 int32 lanes
// are the 16 rows ("lanes = rows"), so one dpbusd with a broadcast group of 4 activation
// quants does 64 multiply-adds for 16 different outputs, sub-block scales are one mullo
// per sub-block, and no horizontal sums are needed. The panel is unpacked once per chunk of
// activation rows: K-quant quants by 16 row loads and a 16 x 16 dword transpose, scales and
// 32-blocks by gathers (measured: transposes made the K-quant unpack ~4x cheaper than
// gathering every dword).
//
// [KQUANT_EXACT] / [QUANT_EXACT]: per (row, token, block) the integer sums are exact and the float
// operations are the reference's (dall * sumi - dmin * summ, then the running sum), one lane
// per row, so results are bit-identical to kernels/ref and to the 1-row path in matmul.cpp;
// choosing this path by batch size therefore keeps [BATCH_INVARIANT].
#include <immintrin.h>

#include <cstddef>
#include <type_traits>

#include "kernels/avx512/kernels_avx512.h"
#include "kernels/quant/blocks.h"

namespace ds::avx512 {
namespace {

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

inline __m512i gather_dwords(const uint8_t* base, __m512i vidx) { return _mm512_i32gather_epi32(vidx, base, 1); }

// Byte offsets of a panel's 16 rows, as gather indices.
inline __m512i row_offsets(size_t row_stride) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(static_cast<int>(row_stride)));
}

// The reference's float step of one Q4_K/Q5_K block, one lane per row ([KQUANT_EXACT]):
// acc + ((ad * d) * sumi - (ad * dmin) * summ).
inline __m512 k4_block_step(__m512 acc, float ad, const PanelK4& p, __m512i sumi, __m512i summ) {
  const __m512 a = _mm512_set1_ps(ad);
  const __m512 dall = _mm512_mul_ps(a, p.d), dmin = _mm512_mul_ps(a, p.dmin);
  return _mm512_add_ps(acc, _mm512_sub_ps(_mm512_mul_ps(dall, _mm512_cvtepi32_ps(sumi)),
                                          _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summ))));
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
    const __m512i x01 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x44), y01 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x44);
    const __m512i x23 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xEE), y23 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xEE);
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
    const __m512i idx = _mm512_setr_epi32(k, 4 + k, 8 + k, 12 + k, 16 + k, 20 + k, 24 + k, 28 + k, 0, 0, 0, 0, 0, 0, 0, 0);
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
// sub-blocks per 32-bit word, vectorized across rows). blk: the row-0 block.
void unpack_scales_k4(const uint8_t* head, size_t stride, PanelK4& p) {
  __m512i h[4];  // d|dmin, scales[0..3], scales[4..7], scales[8..11] (the block's first 16 bytes)
  load_dwords4(head, stride, h);
  const __m512i dd = h[0], w0 = h[1], w1 = h[2], w2 = h[3];
  p.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_and_si512(dd, _mm512_set1_epi32(0xFFFF))));
  p.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
  const __m512i m6 = _mm512_set1_epi32(0x3F3F3F3F), m4 = _mm512_set1_epi32(0x0F0F0F0F),
                m2 = _mm512_set1_epi32(0x03030303);
  const __m512i sc03 = _mm512_and_si512(w0, m6), m03 = _mm512_and_si512(w1, m6);
  const __m512i sc47 = _mm512_or_si512(_mm512_and_si512(w2, m4), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), m2), 4));
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

// qs: 4 pairs of sub-blocks, 32 bytes each (low nibbles: sub-block 2p, high: 2p + 1).
// qh (Q5_K, else null): bit j of byte l is the 5th bit of sub-block j's element l.
void unpack_quants_k4(const uint8_t* qs, const uint8_t* qh, size_t stride, PanelK4& p) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i v[32];
  load_transposed(qs, stride, v);
  load_transposed(qs + 64, stride, v + 16);
  for (int dw = 0; dw < 32; ++dw) {
    const int pair = dw / 8, g = dw % 8;
    p.q[2 * pair][g] = _mm512_and_si512(v[dw], m4);
    p.q[2 * pair + 1][g] = _mm512_and_si512(_mm512_srli_epi32(v[dw], 4), m4);
  }
  if (!qh) return;
  const __m512i one = _mm512_set1_epi8(1);
  __m512i h[16];  // the 64 bytes from qh: its 32 bytes, then 32 bytes of qs (unused)
  load_transposed(qh, stride, h);
  for (int g = 0; g < 8; ++g)
    for (int j = 0; j < 8; ++j)
      p.q[j][g] = _mm512_or_si512(p.q[j][g], _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h[g], j), one), 4));
}

// acc[t] (lane r) += reference float step for rows x tokens t < NT of one superblock.
template <int NT>
[[gnu::always_inline]] inline void accumulate_k4(const PanelK4& p, const BlockQ8_K* const* a, __m512* acc) {
  __m512i sumi[NT], summ[NT];
  for (int t = 0; t < NT; ++t) {
    sumi[t] = _mm512_setzero_si512();
    summ[t] = _mm512_setzero_si512();
  }
  for (int j = 0; j < 8; ++j) {
    __m512i s[NT];
    for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_si512();
    for (int g = 0; g < 8; ++g)
      for (int t = 0; t < NT; ++t) {
        int32_t a4;
        __builtin_memcpy(&a4, a[t]->qs + 32 * j + 4 * g, 4);
        s[t] = _mm512_dpbusd_epi32(s[t], p.q[j][g], _mm512_set1_epi32(a4));
      }
    for (int t = 0; t < NT; ++t) {
      sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(s[t], p.sc[j]));
      int32_t b2;
      __builtin_memcpy(&b2, a[t]->bsums + 2 * j, 4);
      summ[t] = _mm512_dpwssd_epi32(summ[t], _mm512_set1_epi32(b2), p.mp[j]);
    }
  }
  for (int t = 0; t < NT; ++t) acc[t] = k4_block_step(acc[t], a[t]->d, p, sumi[t], summ[t]);
}

template <class WB, bool kHasQh>
void panel_k4(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt) {
  const auto* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const int64_t nb = m.n_in / kQK_K;
  const auto* act = static_cast<const uint8_t*>(m.act);
  __m512 acc[kPanelMaxTok];
  for (int64_t t = 0; t < nt; ++t) acc[t] = _mm512_setzero_ps();
  PanelK4 p;
  for (int64_t ib = 0; ib < nb; ++ib) {
    const auto* b = reinterpret_cast<const WB*>(w0) + ib;
    const auto* base = reinterpret_cast<const uint8_t*>(b);
    // The next superblock, or after the last one the next panel's first (rows r0 + 16...).
    prefetch_rows(ib + 1 < nb ? base + sizeof(WB) : w0 + 16 * m.w_row_stride, m.w_row_stride, sizeof(WB));
    static_assert(offsetof(WB, d) == 0 && offsetof(WB, scales) == 4);
    unpack_scales_k4(base, m.w_row_stride, p);
    const uint8_t* qh = nullptr;
    if constexpr (kHasQh) qh = base + offsetof(WB, qh);
    unpack_quants_k4(base + offsetof(WB, qs), qh, m.w_row_stride, p);
    int64_t t = 0;
    const BlockQ8_K* a[kPanelK4Toks];
    for (; t + kPanelK4Toks <= nt; t += kPanelK4Toks) {
      for (int k = 0; k < kPanelK4Toks; ++k)
        a[k] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t + k) * m.act_row_stride) + ib;
      accumulate_k4<kPanelK4Toks>(p, a, acc + t);
    }
    if (t + kPanelToks <= nt) {
      for (int k = 0; k < kPanelToks; ++k)
        a[k] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t + k) * m.act_row_stride) + ib;
      accumulate_k4<kPanelToks>(p, a, acc + t);
      t += kPanelToks;
    }
    for (; t < nt; ++t) {
      a[0] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t) * m.act_row_stride) + ib;
      accumulate_k4<1>(p, a, acc + t);
    }
  }
  for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(m.out + (t0 + t) * m.out_stride + r0, acc[t]);
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
        int32_t a4;
        __builtin_memcpy(&a4, a[t]->qs + 32 * j + 4 * g, 4);
        __m512i b = _mm512_set1_epi32(a4);
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
      int32_t b2;
      __builtin_memcpy(&b2, a[t]->bsums + 2 * j, 4);
      const __m512i bb = _mm512_set1_epi32(b2);
      for (int r = 0; r < 2; ++r) summ[r][t] = _mm512_dpwssd_epi32(summ[r][t], bb, p[r].mp[j]);
    }
  for (int t = 0; t < NT; ++t) {
    acc0[t] = k4_block_step(acc0[t], a[t]->d, p[0], sumi[0][t], summ[0][t]);
    acc1[t] = k4_block_step(acc1[t], a[t]->d, p[1], sumi[1][t], summ[1][t]);
  }
}

template <class WB, bool kHasQh>
void panel_k4x2(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt) {
  const auto* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const int64_t nb = m.n_in / kQK_K;
  const auto* act = static_cast<const uint8_t*>(m.act);
  __m512 acc[2][kPanelMaxTok];
  for (int64_t t = 0; t < nt; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
  PanelK4 p[2];
  for (int64_t ib = 0; ib < nb; ++ib) {
    for (int r = 0; r < 2; ++r) {
      const auto* base = reinterpret_cast<const uint8_t*>(reinterpret_cast<const WB*>(w0 + 16 * r * m.w_row_stride) + ib);
      prefetch_rows(ib + 1 < nb ? base + sizeof(WB) : w0 + (32 + 16 * r) * m.w_row_stride, m.w_row_stride, sizeof(WB));
      unpack_scales_k4(base, m.w_row_stride, p[r]);
      const uint8_t* qh = nullptr;
      if constexpr (kHasQh) qh = base + offsetof(WB, qh);
      unpack_quants_k4(base + offsetof(WB, qs), qh, m.w_row_stride, p[r]);
    }
    int64_t t = 0;
    const BlockQ8_K* a[kPanelToks];
    for (; t + kPanelToks <= nt; t += kPanelToks) {
      for (int k = 0; k < kPanelToks; ++k)
        a[k] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t + k) * m.act_row_stride) + ib;
      accumulate_k4x2<kPanelToks>(p, a, acc[0] + t, acc[1] + t);
    }
    for (; t < nt; ++t) {
      a[0] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t) * m.act_row_stride) + ib;
      accumulate_k4x2<1>(p, a, acc[0] + t, acc[1] + t);
    }
  }
  for (int r = 0; r < 2; ++r)
    for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(m.out + (t0 + t) * m.out_stride + r0 + 16 * r, acc[r][t]);
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
// bits 2qq..2qq+1 of qh[32n + l] (the reference's dequantize order).
void unpack_q6k(const BlockQ6_K* b, size_t stride, __m512i vidx, PanelQ6K& p) {
  const auto* base = reinterpret_cast<const uint8_t*>(b);
  __m512i ql[32], qh[16];
  load_transposed(base + offsetof(BlockQ6_K, ql), stride, ql);
  load_transposed(base + offsetof(BlockQ6_K, ql) + 64, stride, ql + 16);
  load_transposed(base + offsetof(BlockQ6_K, qh), stride, qh);
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
  for (int j = 0; j < 16; ++j) {
    const int n = j / 8, qq = (j % 8) / 2, l0 = 16 * (j % 2);
    for (int g = 0; g < 4; ++g) {
      const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(ql[(64 * n + 32 * (qq % 2) + l0) / 4 + g], 4 * (qq / 2)), m4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(qh[(32 * n + l0) / 4 + g], 2 * qq), m2);
      p.q[j][g] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4));
    }
  }
  __m512i scw[4];
  load_dwords4(base + offsetof(BlockQ6_K, scales), stride, scw);
  for (int k = 0; k < 4; ++k) {
    const __m512i v = scw[k];
    for (int i = 0; i < 4; ++i) p.sc[4 * k + i] = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * i), 24);
  }
  for (int k = 0; k < 8; ++k)
    p.sp[k] = _mm512_or_si512(_mm512_and_si512(p.sc[2 * k], _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(p.sc[2 * k + 1], 16));
  // d sits in the block's last two bytes: gather the dword ending there (in bounds).
  const __m512i dd = gather_dwords(base + offsetof(BlockQ6_K, d) - 2, vidx);
  p.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
}

template <int NT>
[[gnu::always_inline]] inline void accumulate_q6k(const PanelQ6K& p, const BlockQ8_K* const* a, __m512* acc) {
  __m512i sumi[NT], off[NT];
  for (int t = 0; t < NT; ++t) {
    sumi[t] = _mm512_setzero_si512();
    off[t] = _mm512_setzero_si512();
  }
  for (int j = 0; j < 16; ++j) {
    __m512i s[NT];
    for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_si512();
    for (int g = 0; g < 4; ++g)
      for (int t = 0; t < NT; ++t) {
        int32_t a4;
        __builtin_memcpy(&a4, a[t]->qs + 16 * j + 4 * g, 4);
        s[t] = _mm512_dpbusd_epi32(s[t], p.q[j][g], _mm512_set1_epi32(a4));
      }
    for (int t = 0; t < NT; ++t) sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(s[t], p.sc[j]));
  }
  for (int k = 0; k < 8; ++k)
    for (int t = 0; t < NT; ++t) {
      int32_t b2;
      __builtin_memcpy(&b2, a[t]->bsums + 2 * k, 4);
      off[t] = _mm512_dpwssd_epi32(off[t], _mm512_set1_epi32(b2), p.sp[k]);
    }
  for (int t = 0; t < NT; ++t) {
    const __m512i si = _mm512_sub_epi32(sumi[t], _mm512_slli_epi32(off[t], 5));
    const __m512 dall = _mm512_mul_ps(_mm512_set1_ps(a[t]->d), p.d);
    acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(dall, _mm512_cvtepi32_ps(si)));
  }
}

void panel_q6k(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt) {
  const auto* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const __m512i vidx = row_offsets(m.w_row_stride);
  const auto* act = static_cast<const uint8_t*>(m.act);
  __m512 acc[kPanelMaxTok];
  for (int64_t t = 0; t < nt; ++t) acc[t] = _mm512_setzero_ps();
  PanelQ6K p;
  const int64_t nb = m.n_in / kQK_K;
  for (int64_t ib = 0; ib < nb; ++ib) {
    const auto* next = ib + 1 < nb ? w0 + (ib + 1) * sizeof(BlockQ6_K) : w0 + 16 * m.w_row_stride;
    prefetch_rows(next, m.w_row_stride, sizeof(BlockQ6_K));
    unpack_q6k(reinterpret_cast<const BlockQ6_K*>(w0) + ib, m.w_row_stride, vidx, p);
    const BlockQ8_K* a[kPanelK4Toks];
    int64_t t = 0;
    for (; t + kPanelK4Toks <= nt; t += kPanelK4Toks) {
      for (int k = 0; k < kPanelK4Toks; ++k)
        a[k] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t + k) * m.act_row_stride) + ib;
      accumulate_q6k<kPanelK4Toks>(p, a, acc + t);
    }
    if (t + kPanelToks <= nt) {
      for (int k = 0; k < kPanelToks; ++k)
        a[k] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t + k) * m.act_row_stride) + ib;
      accumulate_q6k<kPanelToks>(p, a, acc + t);
      t += kPanelToks;
    }
    for (; t < nt; ++t) {
      a[0] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t) * m.act_row_stride) + ib;
      accumulate_q6k<1>(p, a, acc + t);
    }
  }
  for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(m.out + (t0 + t) * m.out_stride + r0, acc[t]);
}

// 32-blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): 8 groups of 4 quants per block and row.
// Offset types (Q4_0, Q5_0, Q8_0; off = 8, 16, 0): signed weights w = q - off against
// activations biased to unsigned, a + 128, so dpbusd(a + 128, w) = dot(a, w) + 128 * sum(w)
// and each row's lane starts from -128 * sum(w), computed once per panel block instead of
// a sum of the activations per token (exact either way). The _1 types (min m) keep
// unsigned weights against the signed Q8_1 activations. Then the reference's float step
// per lane: sum += float(sumi) * (dx * dy) [+ mx * sy for the _1 types].
struct Panel32 {
  __m512i q[8];
  __m512i bias;  // offset types: -128 * sum of the row's signed weights in this block
  __m512 d, m;   // m only for Q4_1/Q5_1
};

// A block's bytes for 16 rows, lanes = rows: v[k] lane r = dword k of the bytes at row r's
// b + kWin. kWin = -2 for the types whose quants start at byte 2 mod 4 (d is then the high
// half of v[0]). Masked loads read only the block's own bytes (no fault past a mapping's
// end); 16 loads and one transpose cost less than the 5-9 dword gathers they replace
// (measured: gathers were ~40% of a 48-token Q8_0 panel product).
template <int kWin, int kBytes>
inline void block_dwords(const uint8_t* b, size_t stride, __m512i* v) {
  const __mmask64 keep = (~0ull >> (64 - kBytes)) << -kWin;
  for (int r = 0; r < 16; ++r) v[r] = _mm512_maskz_loadu_epi8(keep, b + kWin + r * stride);
  transpose16(v);
}

// Element 4g + b (b < 4) of a block: byte b of q[g]. Nibble layout: qs[j] low = element j,
// high = element j + 16. qs: the block's 4 quant dwords.
inline void nibbles_panel(const __m512i* qs, Panel32& p) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int g = 0; g < 4; ++g) {
    p.q[g] = _mm512_and_si512(qs[g], m4);
    p.q[g + 4] = _mm512_and_si512(_mm512_srli_epi32(qs[g], 4), m4);
  }
}
// Masks of the elements whose 5th bit is set (Q5 types): bit j of the row's 32-bit qh is
// element j's; group g's bits 4g..4g+3 sit in byte g / 2 of the dword, which a byte
// shuffle copies to the group's four bytes, each then tested against its own bit.
inline void fifth_bit_masks(__m512i h, __mmask64* set) {
  const __m512i lane_base = _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0);  // dword d: byte 4d
  for (int g = 0; g < 8; ++g) {
    const __m512i rep = _mm512_shuffle_epi8(h, _mm512_add_epi8(lane_base, _mm512_set1_epi8(static_cast<char>(g / 2))));
    const int sh = 4 * (g % 2);
    set[g] = _mm512_test_epi8_mask(rep, _mm512_set1_epi32(static_cast<int>(0x08040201u << sh)));
  }
}
inline __m512 half_lo(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)))); }
inline __m512 half_hi(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16))); }

// -128 * sum of each row's signed weights (the activation bias's contribution).
inline __m512i bias_of(const Panel32& p) {
  __m512i s = _mm512_setzero_si512();
  for (int g = 0; g < 8; ++g) s = _mm512_dpbusd_epi32(s, _mm512_set1_epi8(-128), p.q[g]);
  return _mm512_sub_epi32(_mm512_setzero_si512(), s);
}

struct P32Q8_0 {
  using WB = BlockQ8_0;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t* b, size_t stride, Panel32& p) {
    __m512i v[16];
    block_dwords<-2, sizeof(WB)>(b, stride, v);  // d, then 8 quant dwords
    for (int g = 0; g < 8; ++g) p.q[g] = v[1 + g];
    p.d = half_hi(v[0]);
    p.bias = bias_of(p);
  }
};
// Q4_0, Q5_0 (offset 8, 16: signed weights) and Q4_1, Q5_1 (min m: unsigned weights):
// nibbles, 5th bits when kQh, and the block's d (and m).
template <class WB_, int kOff, bool kMin_, bool kQh>
struct P32Nibbles {
  using WB = WB_;
  static constexpr bool kMin = kMin_;
  static void unpack(const uint8_t* b, size_t stride, Panel32& p) {
    // _0 types: window at -2, so [d | ...] is v[0] (d high); _1 types: [d, m] is v[0].
    // Then qh (Q5) and the 4 quant dwords.
    constexpr int kWin = kMin ? 0 : -2;
    __m512i v[16];
    block_dwords<kWin, sizeof(WB)>(b, stride, v);
    nibbles_panel(v + (kQh ? 2 : 1), p);
    if constexpr (kQh) {
      __mmask64 set[8];
      fifth_bit_masks(v[1], set);
      const __m512i v16 = _mm512_set1_epi8(16);
      // Q5_0: q - 16 = nibble where the 5th bit is set, nibble - 16 where not.
      for (int g = 0; g < 8; ++g) {
        if constexpr (kMin) p.q[g] = _mm512_mask_add_epi8(p.q[g], set[g], p.q[g], v16);
        else p.q[g] = _mm512_mask_sub_epi8(p.q[g], static_cast<__mmask64>(~set[g]), p.q[g], v16);
      }
    } else if constexpr (kOff != 0) {
      for (int g = 0; g < 8; ++g) p.q[g] = _mm512_sub_epi8(p.q[g], _mm512_set1_epi8(kOff));
    }
    if constexpr (kMin) {
      p.d = half_lo(v[0]);
      p.m = half_hi(v[0]);
    } else {
      p.d = half_hi(v[0]);
      p.bias = bias_of(p);
    }
  }
};
using P32Q4_0 = P32Nibbles<BlockQ4_0, 8, false, false>;
using P32Q5_0 = P32Nibbles<BlockQ5_0, 16, false, true>;
using P32Q4_1 = P32Nibbles<BlockQ4_1, 0, true, false>;
using P32Q5_1 = P32Nibbles<BlockQ5_1, 0, true, true>;

// Activation rows per pass over one unpacked 32-block panel: 8 independent dpbusd chains
// (4 left the 8-deep chains latency-bound: measured -8% on a 48-token Q8_0 product). Two
// panels (32 rows) run 4 tokens per pass, sharing each broadcast: measured 1.07-1.17x more
// on 48- and 256-token Q5_0/Q8_0 1408x2048 products.
constexpr int kPanel32Toks = 8;

// acc[r][t0 + t] += this block's step for panels r < R, tokens t < NT. Offset types: ab[t]
// are the tokens' quants biased by 128 and ad[t] their float d; _1 types: a[t] are the
// tokens' Q8_1 blocks. With R = 2 each activation broadcast feeds both panels' dpbusd.
template <class L, class AB, int R, int NT>
[[gnu::always_inline]] inline void accumulate32(const Panel32* p, const AB* const* a, const uint8_t (*ab)[32],
                                                const float* ad, __m512 (*acc)[kPanelMaxTok], int64_t t0) {
  __m512i s[R][NT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) s[r][t] = L::kMin ? _mm512_setzero_si512() : p[r].bias;
  for (int g = 0; g < 8; ++g) {
    // One register per group for all NT tokens: as the memory operand the weights would
    // be loaded once per token (the broadcast activation can only be a register there).
    __m512i wq[R];
    for (int r = 0; r < R; ++r) {
      wq[r] = p[r].q[g];
      __asm__("" : "+v"(wq[r]));
    }
    for (int t = 0; t < NT; ++t) {
      int32_t a4;
      __builtin_memcpy(&a4, L::kMin ? a[t]->qs + 4 * g : reinterpret_cast<const int8_t*>(ab[t] + 4 * g), 4);
      __m512i b = _mm512_set1_epi32(a4);
      if constexpr (R > 1) __asm__("" : "+v"(b));
      for (int r = 0; r < R; ++r) {
        if constexpr (L::kMin) s[r][t] = _mm512_dpbusd_epi32(s[r][t], wq[r], b);
        else s[r][t] = _mm512_dpbusd_epi32(s[r][t], b, wq[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) {
      const float dy = L::kMin ? _cvtsh_ss(a[t]->d) : ad[t];
      const __m512 dd = _mm512_mul_ps(p[r].d, _mm512_set1_ps(dy));
      __m512 step = _mm512_mul_ps(_mm512_cvtepi32_ps(s[r][t]), dd);
      if constexpr (L::kMin) step = _mm512_add_ps(step, _mm512_mul_ps(p[r].m, _mm512_set1_ps(_cvtsh_ss(a[t]->s))));
      acc[r][t0 + t] = _mm512_add_ps(acc[r][t0 + t], step);
    }
}

// Tokens [t, t + NT) of block ib.
template <class L, class AB, int R, int NT>
[[gnu::always_inline]] inline void accumulate32_at(const Panel32* p, const uint8_t* act, size_t act_stride, int64_t ib,
                                                   int64_t t, const uint8_t (*ab)[32], const float* ad,
                                                   __m512 (*acc)[kPanelMaxTok]) {
  const AB* a[NT];
  if constexpr (L::kMin)
    for (int k = 0; k < NT; ++k) a[k] = reinterpret_cast<const AB*>(act + (t + k) * act_stride) + ib;
  accumulate32<L, AB, R, NT>(p, a, ab + t, ad + t, acc, t);
}

// R = 1 or 2 panels: rows [r0, r0 + 16 R).
template <class L, int R>
void panel32(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt) {
  using AB = std::conditional_t<L::kMin, BlockQ8_1, BlockQ8_0>;
  const auto* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const auto* act = static_cast<const uint8_t*>(m.act) + t0 * m.act_row_stride;
  __m512 acc[R][kPanelMaxTok];
  for (int r = 0; r < R; ++r)
    for (int64_t t = 0; t < nt; ++t) acc[r][t] = _mm512_setzero_ps();
  Panel32 p[R];
  // Offset types: this block's activation quants of every token biased by 128 (xor 0x80)
  // and their d as float, written a whole token pass before they are read.
  alignas(64) uint8_t ab[kPanelMaxTok][32];
  alignas(64) float ad[kPanelMaxTok];
  for (int64_t ib = 0; ib < m.n_in / 32; ++ib) {
    for (int r = 0; r < R; ++r) {
      const uint8_t* b = w0 + 16 * r * m.w_row_stride + ib * sizeof(typename L::WB);
      // Two lines ahead of this block: each line is prefetched 2-4 times (blocks of 18-36
      // bytes), cheap next to 16 rows x the activation rows of multiply-adds.
      prefetch_rows(b + 128, m.w_row_stride, 1);
      L::unpack(b, m.w_row_stride, p[r]);
    }
    if constexpr (!L::kMin)
      for (int64_t t = 0; t < nt; ++t) {
        const AB& b = reinterpret_cast<const AB*>(act + t * m.act_row_stride)[ib];
        _mm256_store_si256(reinterpret_cast<__m256i*>(ab[t]),
                           _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)), _mm256_set1_epi8(-128)));
        ad[t] = _cvtsh_ss(b.d);
      }
    int64_t t = 0;
    // 8 dpbusd chains per pass: 8 tokens x 1 panel or 4 tokens x 2 panels.
    constexpr int kToks = R == 1 ? kPanel32Toks : 4;
    for (; t + kToks <= nt; t += kToks) accumulate32_at<L, AB, R, kToks>(p, act, m.act_row_stride, ib, t, ab, ad, acc);
    if (R == 1 && t + 4 <= nt) {
      accumulate32_at<L, AB, R, 4>(p, act, m.act_row_stride, ib, t, ab, ad, acc);
      t += 4;
    }
    for (; t < nt; ++t) accumulate32_at<L, AB, R, 1>(p, act, m.act_row_stride, ib, t, ab, ad, acc);
  }
  for (int r = 0; r < R; ++r)
    for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(m.out + (t0 + t) * m.out_stride + r0 + 16 * r, acc[r][t]);
}

template <class L>
int64_t panel32_rows(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt, bool pair) {
  if (pair) {
    panel32<L, 2>(m, r0, t0, nt);
    return 32;
  }
  panel32<L, 1>(m, r0, t0, nt);
  return 16;
}

}  // namespace

bool panel_supported(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0:
      return true;
    default:
      return false;
  }
}

int64_t panel_matmul(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt) {
  const bool pair = r0 + 32 <= m.row_end;
  switch (m.wtype) {
    case GgmlType::Q4_K: pair ? panel_k4x2<BlockQ4_K, false>(m, r0, t0, nt) : panel_k4<BlockQ4_K, false>(m, r0, t0, nt); break;
    case GgmlType::Q5_K: pair ? panel_k4x2<BlockQ5_K, true>(m, r0, t0, nt) : panel_k4<BlockQ5_K, true>(m, r0, t0, nt); break;
    case GgmlType::Q6_K: panel_q6k(m, r0, t0, nt); return 16;
    case GgmlType::Q8_0: return panel32_rows<P32Q8_0>(m, r0, t0, nt, pair);
    case GgmlType::Q4_0: return panel32_rows<P32Q4_0>(m, r0, t0, nt, pair);
    case GgmlType::Q5_0: return panel32_rows<P32Q5_0>(m, r0, t0, nt, pair);
    case GgmlType::Q4_1: return panel32_rows<P32Q4_1>(m, r0, t0, nt, pair);
    case GgmlType::Q5_1: return panel32_rows<P32Q5_1>(m, r0, t0, nt, pair);
    default: return 16;
  }
  return pair ? 32 : 16;
}

}  // namespace ds::avx512
