// AVX-512 VNNI "panel" matmul for the quantized types (K-quants and 32-blocks) when many
// activation rows share the weights (prefill): 16 weight rows are unpacked per superblock into registers whose 16 int32
// lanes are the 16 rows ("lanes = rows"), so one dpbusd with a broadcast group of 4 activation quants does 64
// multiply-adds for 16 different outputs, sub-block scales are one mullo per sub-block, and no horizontal sums are
// needed. The panel is unpacked once per chunk of activation rows: K-quant quants by 16 row loads and a 16 x 16 dword
// transpose, scales and 32-blocks by gathers (measured: transposes made the K-quant unpack ~4x cheaper than gathering
// every dword).
//
// [KQUANT_EXACT] / [QUANT_EXACT]: per (row, token, block) the integer sums are exact and the float
// operations are the reference's (dall * sumi - dmin * summ, then the running sum), one lane
// per row, so results are bit-identical to kernels/ref and to the 1-row path in matmul.cpp;
// choosing this path by batch size therefore keeps [BATCH_INVARIANT].
#include "kernels/avx512/intrinsics.h"

#include <cstddef>
#include <type_traits>

#include "kernels/avx512/kernels_avx512.h"
#include "kernels/avx512/panel_kquant.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/iq_tables.h"
#include "kernels/quant/repack.h"

namespace ds::avx512 {
namespace {

// The passes of one unpacked superblock over the activation rows [t0, t0 + nt): groups of
// NA rows, then at most one of NB, then single rows. pass.operator()<N>(a, t) gets a[k] =
// block ib of row t0 + t + k, k < N.
template <int NA, int NB, class Pass>
[[gnu::always_inline]] inline void token_passes(const MatmulArgs& m, int64_t t0, int64_t nt, int64_t ib, Pass&& pass) {
  const auto* act = static_cast<const uint8_t*>(m.act);
  const BlockQ8_K* a[NA];
  auto run = [&]<int N>(int64_t t) {
    for (int k = 0; k < N; ++k) a[k] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t + k) * m.act_row_stride) + ib;
    pass.template operator()<N>(a, t);
  };
  int64_t t = 0;
  for (; t + NA <= nt; t += NA) run.template operator()<NA>(t);
  if (t + NB <= nt) {
    run.template operator()<NB>(t);
    t += NB;
  }
  for (; t < nt; ++t) run.template operator()<1>(t);
}

template <class WB, bool kHasQh>
void panel_k4(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt) {
  const auto* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const int64_t nb = m.n_in / kQK_K;
  __m512 acc[kPanelMaxTok];
  for (int64_t t = 0; t < nt; ++t) acc[t] = _mm512_setzero_ps();
  PanelK4 p;
  const uint8_t* pk = packed_panel(m, r0);
  for (int64_t ib = 0; ib < nb; ++ib) {
    if (pk) {
      unpack_k4_packed<WB, kHasQh>(pk + ib * kPanelRows * sizeof(WB), p);
    } else {
      const auto* base = reinterpret_cast<const uint8_t*>(reinterpret_cast<const WB*>(w0) + ib);
      // The next superblock, or after the last one the next panel's first (rows r0 + 16...).
      prefetch_rows(ib + 1 < nb ? base + sizeof(WB) : w0 + 16 * m.w_row_stride, m.w_row_stride, sizeof(WB));
      unpack_k4_rows<WB, kHasQh>(base, m.w_row_stride, p);
    }
    token_passes<kPanelK4Toks, kPanelToks>(
        m, t0, nt, ib, [&]<int N>(const BlockQ8_K* const* a, int64_t t) { accumulate_k4<N>(p, a, acc + t); });
  }
  for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(m.out + (t0 + t) * m.out_stride + r0, acc[t]);
}

template <class WB, bool kHasQh>
void panel_k4x2(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt) {
  const auto* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const int64_t nb = m.n_in / kQK_K;
  __m512 acc[2][kPanelMaxTok];
  for (int64_t t = 0; t < nt; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
  PanelK4 p[2];
  const uint8_t* pk = packed_panel(m, r0);
  for (int64_t ib = 0; ib < nb; ++ib) {
    for (int r = 0; r < 2; ++r) {
      if (pk) {
        unpack_k4_packed<WB, kHasQh>(pk + (16 * r * m.w_row_stride) + ib * kPanelRows * sizeof(WB), p[r]);
        continue;
      }
      const auto* base =
          reinterpret_cast<const uint8_t*>(reinterpret_cast<const WB*>(w0 + 16 * r * m.w_row_stride) + ib);
      prefetch_rows(ib + 1 < nb ? base + sizeof(WB) : w0 + (32 + 16 * r) * m.w_row_stride, m.w_row_stride, sizeof(WB));
      unpack_k4_rows<WB, kHasQh>(base, m.w_row_stride, p[r]);
    }
    // 6 activation rows x 2 panels: 12 dpbusd chains (8 with 4 rows left the multiply
    // pipes waiting on latency; 16 with 8 rows spilled, 1.4x slower). 1 thread, 3
    // alternations: Q4_K 1536x8960, 512 rows 26.4 -> 24.7 ms; MoE 2048x1408, 256 rows
    // 2.55 -> 2.43 ms, 48 rows 523 -> 512 us; 5 rows were in between.
    token_passes<6, kPanelToks>(m, t0, nt, ib, [&]<int N>(const BlockQ8_K* const* a, int64_t t) {
      accumulate_k4x2<N>(p, a, acc[0] + t, acc[1] + t);
    });
  }
  for (int r = 0; r < 2; ++r)
    for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(m.out + (t0 + t) * m.out_stride + r0 + 16 * r, acc[r][t]);
}

// The K-quants with 16 sub-blocks of 16 (Q6_K, Q3_K, Q2_K), from the file's layout or the
// packed one: one 16-row panel per call. Q3_K shares Q6_K's panel (signed scales, the
// offset through the bsums, shift 2 instead of 5); Q2_K has its mins.
template <GgmlType kType>
struct K16 {
  static constexpr bool kQ6 = kType == GgmlType::Q6_K, kQ3 = kType == GgmlType::Q3_K;
  using WB = std::conditional_t<kQ6, BlockQ6_K, std::conditional_t<kQ3, BlockQ3_K, BlockQ2_K>>;
  using Panel = std::conditional_t<kQ6 || kQ3, PanelQ6K, PanelQ2K>;
  static void unpack_rows(const uint8_t* row0, size_t stride, __m512i vidx, Panel& p) {
    if constexpr (kQ6)
      unpack_q6k_rows(row0, stride, vidx, p);
    else if constexpr (kQ3)
      unpack_q3k_rows(row0, stride, vidx, p);
    else
      unpack_q2k_rows(row0, stride, vidx, p);
  }
  static void unpack_packed(const uint8_t* blk, Panel& p) {
    if constexpr (kQ6)
      unpack_q6k_packed(blk, p);
    else if constexpr (kQ3)
      unpack_q3k_packed(blk, p);
    else
      unpack_q2k_packed(blk, p);
  }
  template <int NT>
  static void accumulate(const Panel& p, const BlockQ8_K* const* a, __m512* acc) {
    if constexpr (kQ6 || kQ3)
      accumulate_q6k<NT, kQ6 ? 5 : 2>(p, a, acc);
    else
      accumulate_q2k<NT>(p, a, acc);
  }
};

template <class K>
void panel_k16(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt) {
  using WB = typename K::WB;
  const auto* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const __m512i vidx = row_offsets(m.w_row_stride);
  __m512 acc[kPanelMaxTok];
  for (int64_t t = 0; t < nt; ++t) acc[t] = _mm512_setzero_ps();
  typename K::Panel p;
  const int64_t nb = m.n_in / kQK_K;
  const uint8_t* pk = packed_panel(m, r0);
  for (int64_t ib = 0; ib < nb; ++ib) {
    if (pk) {
      K::unpack_packed(pk + ib * kPanelRows * sizeof(WB), p);
    } else {
      const auto* next = ib + 1 < nb ? w0 + (ib + 1) * sizeof(WB) : w0 + 16 * m.w_row_stride;
      prefetch_rows(next, m.w_row_stride, sizeof(WB));
      K::unpack_rows(w0 + ib * sizeof(WB), m.w_row_stride, vidx, p);
    }
    token_passes<kPanelK4Toks, kPanelToks>(
        m, t0, nt, ib, [&]<int N>(const BlockQ8_K* const* a, int64_t t) { K::template accumulate<N>(p, a, acc + t); });
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

// -128 * sum of each row's signed weights (the activation bias's contribution).
inline __m512i bias_of(const Panel32& p) {
  __m512i s = _mm512_setzero_si512();
  for (int g = 0; g < 8; ++g) s = _mm512_dpbusd_epi32(s, _mm512_set1_epi8(-128), p.q[g]);
  return _mm512_sub_epi32(_mm512_setzero_si512(), s);
}

struct P32Q8_0 {
  using WB = BlockQ8_0;
  static constexpr bool kMin = false;
  static constexpr bool kPackable = true;  // has unpack_packed
  static void unpack(const uint8_t* b, size_t stride, Panel32& p) {
    __m512i v[16];
    block_dwords<-2, sizeof(WB)>(b, stride, v);  // d, then 8 quant dwords
    for (int g = 0; g < 8; ++g) p.q[g] = v[1 + g];
    p.d = half_hi(v[0]);
    p.bias = bias_of(p);
  }
  // From a packed block (repack.h): the 8 quant dwords, then the 16 rows' d.
  static void unpack_packed(const uint8_t* blk, Panel32& p) {
    for (int g = 0; g < 8; ++g) p.q[g] = _mm512_loadu_si512(blk + 64 * g);
    p.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * 8)));
    p.bias = bias_of(p);
  }
};
// Q4_0, Q5_0 (offset 8, 16: signed weights) and Q4_1, Q5_1 (min m: unsigned weights):
// nibbles, 5th bits when kQh, and the block's d (and m).
template <class WB_, int kOff, bool kMin_, bool kQh>
struct P32Nibbles {
  using WB = WB_;
  static constexpr bool kMin = kMin_;
  static constexpr bool kPackable = true;
  static void unpack(const uint8_t* b, size_t stride, Panel32& p) {
    // _0 types: window at -2, so [d | ...] is v[0] (d high); _1 types: [d, m] is v[0].
    // Then qh (Q5) and the 4 quant dwords.
    constexpr int kWin = kMin ? 0 : -2;
    __m512i v[16];
    block_dwords<kWin, sizeof(WB)>(b, stride, v);
    quants(v + 1, p);
    if constexpr (kMin) {
      p.d = half_lo(v[0]);
      p.m = half_hi(v[0]);
    } else {
      p.d = half_hi(v[0]);
      p.bias = bias_of(p);
    }
  }
  // From a packed block (repack.h): qh (Q5), the 4 quant dwords, then the 16 rows' d (_0
  // types: 2 bytes each) or d | m (_1 types: a line of dwords); blocks of 16 rows are not
  // 64-byte multiples: unaligned loads.
  static void unpack_packed(const uint8_t* blk, Panel32& p) {
    constexpr int kDwords = kQh ? 5 : 4;
    __m512i v[kDwords];
    for (int k = 0; k < kDwords; ++k) v[k] = _mm512_loadu_si512(blk + 64 * k);
    quants(v, p);
    if constexpr (kMin) {
      const __m512i dm = _mm512_loadu_si512(blk + 64 * kDwords);
      p.d = half_lo(dm);
      p.m = half_hi(dm);
    } else {
      p.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * kDwords)));
      p.bias = bias_of(p);
    }
  }

 private:
  // v: [qh (Q5)], then the 4 quant dwords, lanes = rows.
  static void quants(const __m512i* v, Panel32& p) {
    nibbles_panel(v + (kQh ? 1 : 0), p);
    if constexpr (kQh) {
      __mmask64 set[8];
      fifth_bit_masks(v[0], set);
      const __m512i v16 = _mm512_set1_epi8(16);
      // Q5_0: q - 16 = nibble where the 5th bit is set, nibble - 16 where not.
      for (int g = 0; g < 8; ++g) {
        if constexpr (kMin)
          p.q[g] = _mm512_mask_add_epi8(p.q[g], set[g], p.q[g], v16);
        else
          p.q[g] = _mm512_mask_sub_epi8(p.q[g], static_cast<__mmask64>(~set[g]), p.q[g], v16);
      }
    } else if constexpr (kOff != 0) {
      for (int g = 0; g < 8; ++g) p.q[g] = _mm512_sub_epi8(p.q[g], _mm512_set1_epi8(kOff));
    }
  }
};
// IQ4_NL (18 bytes: d, qs[16]) and MXFP4 (17 bytes: e, qs[16]): nibbles through the
// 16-entry value table (signed weights, the offset types' bias), and [IQUANT_ORDER]'s
// float step, one fma per block: acc = fma(float(isum), d_w * d_a, acc).
template <bool kMx>
struct P32Table {
  using WB = std::conditional_t<kMx, BlockMxfp4, BlockIQ4_NL>;
  static constexpr bool kMin = false;
  static constexpr bool kPackable = false;
  static constexpr bool kFma = true;
  static void unpack(const uint8_t* b, size_t stride, Panel32& p) {
    // window at -2 (IQ4_NL: d is the high half of v[0]) or -3 (MXFP4: e is byte 3 of v[0])
    constexpr int kWin = kMx ? -3 : -2;
    __m512i v[16];
    block_dwords<kWin, sizeof(WB)>(b, stride, v);
    nibbles_panel(v + 1, p);
    const __m512i values =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMx ? kMxfp4Values : kIq4nlValues)));
    for (int g = 0; g < 8; ++g) p.q[g] = _mm512_shuffle_epi8(values, p.q[g]);
    if constexpr (kMx) {  // 2^(e - 128): biased exponent e - 1, or the subnormals 2^-127, 2^-128 (iq::mxfp4_scale)
      const __m512i e = _mm512_srli_epi32(v[0], 24);
      const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
      const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
      p.d = _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), normal, sub));
    } else {
      p.d = half_hi(v[0]);
    }
    p.bias = bias_of(p);
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
        if constexpr (L::kMin)
          s[r][t] = _mm512_dpbusd_epi32(s[r][t], wq[r], b);
        else
          s[r][t] = _mm512_dpbusd_epi32(s[r][t], b, wq[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) {
      const float dy = L::kMin ? _cvtsh_ss(a[t]->d) : ad[t];
      const __m512 dd = _mm512_mul_ps(p[r].d, _mm512_set1_ps(dy));
      if constexpr (requires { L::kFma; }) {
        acc[r][t0 + t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][t]), dd, acc[r][t0 + t]);
        continue;
      }
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
  // Packed panels (repack.h): each a sequential stream of 16-row blocks, prefetched
  // kPackedAhead bytes ahead (one block's lines per block).
  const uint8_t* pk = packed_panel(m, r0);
  constexpr size_t kBlk = kPanelRows * sizeof(typename L::WB), kPackedAhead = 4096;
  for (int64_t ib = 0; ib < m.n_in / 32; ++ib) {
    for (int r = 0; r < R; ++r) {
      if constexpr (L::kPackable) {
        if (pk) {
          const uint8_t* blk = pk + 16 * r * m.w_row_stride + static_cast<size_t>(ib) * kBlk;
          for (size_t o = 0; o < kBlk; o += 64)
            _mm_prefetch(reinterpret_cast<const char*>(blk) + kPackedAhead + o, _MM_HINT_T0);
          L::unpack_packed(blk, p[r]);
          continue;
        }
      }
      const uint8_t* b = w0 + 16 * r * m.w_row_stride + ib * sizeof(typename L::WB);
      // Two lines ahead of this block: each line is prefetched 2-4 times (blocks of 18-36
      // bytes), cheap next to 16 rows x the activation rows of multiply-adds.
      prefetch_rows(b + 128, m.w_row_stride, 1);
      L::unpack(b, m.w_row_stride, p[r]);
    }
    if constexpr (!L::kMin)
      for (int64_t t = 0; t < nt; ++t) {
        const AB& b = reinterpret_cast<const AB*>(act + t * m.act_row_stride)[ib];
        _mm256_store_si256(
            reinterpret_cast<__m256i*>(ab[t]),
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
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

int64_t panel_matmul(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt) {
  const bool pair = r0 + 32 <= m.row_end;
  switch (m.wtype) {
    case GgmlType::Q4_K:
      pair ? panel_k4x2<BlockQ4_K, false>(m, r0, t0, nt) : panel_k4<BlockQ4_K, false>(m, r0, t0, nt);
      break;
    case GgmlType::Q5_K:
      pair ? panel_k4x2<BlockQ5_K, true>(m, r0, t0, nt) : panel_k4<BlockQ5_K, true>(m, r0, t0, nt);
      break;
    case GgmlType::Q6_K:
      panel_k16<K16<GgmlType::Q6_K>>(m, r0, t0, nt);
      return 16;
    case GgmlType::Q3_K:
      panel_k16<K16<GgmlType::Q3_K>>(m, r0, t0, nt);
      return 16;
    case GgmlType::Q2_K:
      panel_k16<K16<GgmlType::Q2_K>>(m, r0, t0, nt);
      return 16;
    case GgmlType::Q8_0:
      return panel32_rows<P32Q8_0>(m, r0, t0, nt, pair);
    case GgmlType::Q4_0:
      return panel32_rows<P32Q4_0>(m, r0, t0, nt, pair);
    case GgmlType::Q5_0:
      return panel32_rows<P32Q5_0>(m, r0, t0, nt, pair);
    case GgmlType::Q4_1:
      return panel32_rows<P32Q4_1>(m, r0, t0, nt, pair);
    case GgmlType::Q5_1:
      return panel32_rows<P32Q5_1>(m, r0, t0, nt, pair);
    case GgmlType::IQ4_NL:
      return panel32_rows<P32Table<false>>(m, r0, t0, nt, pair);
    case GgmlType::MXFP4:
      return panel32_rows<P32Table<true>>(m, r0, t0, nt, pair);
    default:
      return 16;
  }
  return pair ? 32 : 16;
}

}  // namespace ds::avx512
