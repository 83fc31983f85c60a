// AVX-512 decode GEMV for the 32-block types Q4_0 and Q5_0 against Q8_0 activations: 4
// weight rows (rstep apart, one per stream: matmul_gemv.cpp) x 4 blocks per step.
// Q8_0 weights would fit the same scheme (SpanQ8_0 below, used here for the activation
// blocks) and measured as fast from cache as the tile loop, but slower from memory: its
// 34-byte blocks need four 64-byte loads per row and step. Q8_0 stays on the tile loop.
//
// The reference adds one float per block (float(sumi) * (d_w * d_a)), so the cost is in
// reducing 32 products to one integer per (row, block). Here the 4 blocks of a row are
// gathered into two registers with one 16-byte chunk per block (elements 0..15 and
// 16..31: the natural split of the nibbles; the Q8_0 activation is split the same way), using
// word permutes over two 64-byte loads (blocks are 18, 22 or 34 bytes, 2-byte aligned).
// Two dpbusd (u8 weights x s8 activations) then leave each block's sum in its own 128-bit
// chunk, and one transposing tree for the 4 rows yields chunk b = [row 0..3 of block b].
// The weights' quants are unsigned (q, offsets 8 and 16 in x = d * (q - offset)), and the
// offset times the activation block sum is subtracted: the same exact integer.
//
// [QUANT_EXACT]: per (row, block) the integer sum is exact and the float operations are
// the reference's (d_w * d_a, times float(sumi), added to the running sum in block order),
// one lane per row, so results are bit-identical to kernels/ref and to the tile loop.
#include "kernels/avx512/intrinsics.h"

#include "kernels/avx512/dot_blocks.h"
#include "kernels/avx512/gemv_common.h"
#include "kernels/avx512/kernels_avx512.h"

namespace ds::avx512 {
namespace {

using namespace gemv;

constexpr int kBlocks = 4;  // 32-blocks per step

// 4 blocks of one row: u8 quants of elements 0..15 (lo) and 16..31 (hi) of block b in
// 128-bit chunk b; the fp16 block scale d_b in words 4b..4b+3 of d.
struct Span4 {
  __m512i lo, hi, d;
};

inline __m512i load64(const uint8_t* p, int off) {
  return _mm512_loadu_si512(p + off);
}
// Words of a span from two 64-byte tables loaded at byte offsets oa and ob (word g of the
// span is word g - oa/2 of the first table if it lies there, else of the second).
inline int table_word(int g, int oa, int ob) {
  return g - oa / 2 < 32 ? g - oa / 2 : 32 + g - ob / 2;
}

// The Q8_0 activation (34-byte blocks: d, qs[32]). Block b's qs are words 17b + 1 .. 17b
// + 16; the lo halves come from bytes [0, 128), the hi halves from [8, 136), so no load
// reads past the 4 blocks. d_a of block b goes to words 4b..4b+3 (one per weight row).
struct SpanQ8_0 {
  __m512i idx_lo = idx16([](int i) { return table_word(17 * (i / 8) + 1 + i % 8, 0, 64); });
  __m512i idx_hi = idx16([](int i) { return table_word(17 * (i / 8) + 9 + i % 8, 8, 72); });
  __m512i idx_d = idx16([](int i) { return 17 * ((i % 16) / 4); });
  Span4 load(const uint8_t* p) const {
    const __m512i z0 = load64(p, 0), z1 = load64(p, 64);
    return {_mm512_permutex2var_epi16(z0, idx_lo, z1), _mm512_permutex2var_epi16(load64(p, 8), idx_hi, load64(p, 72)),
            _mm512_permutex2var_epi16(z0, idx_d, z1)};
  }
};

inline void split_nibbles(__m512i q, Span4& s) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  s.lo = _mm512_and_si512(q, m4);
  s.hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
}

// Weights. Q4_0 (18 bytes: d, qs[16]): qs words 9b + 1 .. 9b + 8, tables at bytes 0 and 8.
struct SpanQ4_0 {
  using WB = BlockQ4_0;
  static constexpr int kOffShift = 3;
  __m512i idx_q = idx16([](int i) { return table_word(9 * (i / 8) + 1 + i % 8, 0, 8); });
  __m512i idx_d = idx16([](int i) { return 9 * ((i % 16) / 4); });
  Span4 unpack(const uint8_t* p) const {
    const __m512i z0 = load64(p, 0), z1 = load64(p, 8);
    Span4 s;
    split_nibbles(_mm512_permutex2var_epi16(z0, idx_q, z1), s);
    s.d = _mm512_permutex2var_epi16(z0, idx_d, z1);
    return s;
  }
};

// Q5_0 (22 bytes: d, qh[4], qs[16]): qs words 11b + 3 .. 11b + 10, tables at bytes 0 and 24.
// The aux permute gathers d_b (words 4b..4b+3), the qh words of the lo halves (bits 0..15,
// words 16..19) and of the hi halves (bits 16..31, words 20..23): as 64-bit masks they
// set the 5th bit of byte 16b + j.
struct SpanQ5_0 {
  using WB = BlockQ5_0;
  static constexpr int kOffShift = 4;
  __m512i idx_q = idx16([](int i) { return table_word(11 * (i / 8) + 3 + i % 8, 0, 24); });
  __m512i idx_aux = idx16([](int i) {
    if (i < 16) return table_word(11 * (i / 4), 0, 24);
    if (i < 24) return table_word(11 * (i % 4) + 1 + (i >= 20), 0, 24);
    return 0;
  });
  Span4 unpack(const uint8_t* p) const {
    const __m512i z0 = load64(p, 0), z1 = load64(p, 24);
    Span4 s;
    split_nibbles(_mm512_permutex2var_epi16(z0, idx_q, z1), s);
    s.d = _mm512_permutex2var_epi16(z0, idx_aux, z1);
    const __m128i qh = _mm512_extracti32x4_epi32(s.d, 2);
    const __m512i sixteen = _mm512_set1_epi8(16);
    s.lo = _mm512_mask_add_epi8(s.lo, _cvtu64_mask64(static_cast<uint64_t>(_mm_cvtsi128_si64(qh))), s.lo, sixteen);
    s.hi = _mm512_mask_add_epi8(s.hi, _cvtu64_mask64(static_cast<uint64_t>(_mm_extract_epi64(qh, 1))), s.hi, sixteen);
    return s;
  }
};

template <class S>
struct DotFor;
template <>
struct DotFor<SpanQ4_0> {
  using T = DotQ4_0;
};
template <>
struct DotFor<SpanQ5_0> {
  using T = DotQ5_0;
};

template <class S>
void gemv4_32(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  using WB = typename S::WB;
  const uint8_t* act = static_cast<const uint8_t*>(m.act) + t * m.act_row_stride;
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const int64_t nb = m.n_in / 32, n_steps = nb / kBlocks;
  static const S sp;
  static const SpanQ8_0 asp;
  const __m512i ones = _mm512_set1_epi8(1);
  __m128 acc = _mm_setzero_ps();
  for (int64_t is = 0; is < n_steps; ++is) {
    const Span4 a = asp.load(act + is * kBlocks * sizeof(BlockQ8_0));
    const uint8_t* wb = w0 + is * kBlocks * sizeof(WB);
    __m512i z[kRows], dw = _mm512_setzero_si512();
    for (int r = 0; r < kRows; ++r) {
      const Span4 u = sp.unpack(wb + r * ws);
      z[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u.lo, a.lo), u.hi, a.hi);
      dw = _mm512_mask_blend_epi16(0x1111u << r, dw, u.d);
    }
    // chunk b = [row 0..3] of block b, minus offset * (the activation block sums)
    const __m512i sa =
        chunk_sums(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, a.lo), ones, a.hi));
    const __m512i sumi = _mm512_sub_epi32(transpose_add4(z), _mm512_slli_epi32(sa, S::kOffShift));
    const __m512 dd =
        _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(dw)), _mm512_cvtph_ps(_mm512_castsi512_si256(a.d)));
    const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), dd);
    acc = _mm_add_ps(acc, _mm512_castps512_ps128(v));
    acc = _mm_add_ps(acc, _mm512_extractf32x4_ps(v, 1));
    acc = _mm_add_ps(acc, _mm512_extractf32x4_ps(v, 2));
    acc = _mm_add_ps(acc, _mm512_extractf32x4_ps(v, 3));
  }
  alignas(16) float out[kRows];
  _mm_store_ps(out, acc);
  if (n_steps * kBlocks < nb) {  // the last blocks, one at a time (the tile loop's per-block step)
    using Dot = typename DotFor<S>::T;
    const auto* ab = reinterpret_cast<const BlockQ8_0*>(act);
    for (int r = 0; r < kRows; ++r) {
      const auto* b = reinterpret_cast<const WB*>(w0 + r * ws);
      Acc32 sum{out[r]};
      for (int64_t ib = n_steps * kBlocks; ib < nb; ++ib) {
        Unpacked32 u;
        Dot::unpack(b[ib], u);
        Dot::accumulate(u, ab[ib], sum);
      }
      out[r] = sum.sum;
    }
  }
  store_rows4(m.out + t * m.out_stride + r0, rstep, _mm_load_ps(out));
}

}  // namespace

Gemv4Fn gemv4_fn_32(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
      return gemv4_32<SpanQ4_0>;
    case GgmlType::Q5_0:
      return gemv4_32<SpanQ5_0>;
    default:
      return nullptr;
  }
}

}  // namespace ds::avx512
