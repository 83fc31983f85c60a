// AVX-512 matmul over weights repacked into 16-row panels at load (kernels/quant/repack.h,
// docs/repack.md): the panels of panel_kquant.h loaded with plain 64-byte
// loads instead of row loads, transposes and gathers.
//
// Up to kSmallMaxTok activation rows (decode, batched decode) go panel after panel, each a
// sequential stream with a software prefetch two blocks ahead (without it the packed stream
// read 12.7 GB/s on one thread, with it 18.7). Running 4 panels from 4 quarters in lockstep,
// as the row GEMV does with rows, was slower in the engine (dense decode 25-38 vs 26-42 t/s,
// 8-sequence aggregate 101-107 vs 137-144); without the software prefetch, 1, 2 or 4
// panels in lockstep all read 0.4-0.5x as much from memory, and two panels in lockstep
// with it, one row, 0.75-0.9x. One or
// two rows (most routed experts in batched MoE decode) use fused kernels that decode the
// quants straight into the products, reading each superblock's lines in address order;
// 3-8 rows of Q4_K/Q5_K take k4_rows (4 or 8 rows decoding one sub-block pair at a time
// into registers) and the one- and two-row kernels for the rest; Q6_K takes q6k_tokens for
// every row count up to 8; 3-8 rows of Q3_K and Q2_K unpack the panel first and go to the
// accumulate kernels of panel_kquant.h. One or
// two rows of the 32-block types take small_batch32_fused (unsigned weights, the offset
// through the activation block sums); more rows, and more than 8 of any type, go to the
// panel kernels of matmul_panel.cpp, which read the packed form through MatmulArgs::w_panels.
//
// [KQUANT_EXACT]: the per-(row, token, block) integer sums and float steps are those of
// the unpacked panels, so results are bit-identical to kernels/ref whichever path, token
// count or row range computes them ([BATCH_INVARIANT]).
#include "kernels/avx512/intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/avx512/dot_blocks.h"
#include "kernels/avx512/kernels_avx512.h"
#include "kernels/avx512/panel_kquant.h"
#include "kernels/quant/repack.h"

namespace ds::avx512 {
namespace {

constexpr int64_t kSmallMaxTok = 8;

// Quarter `part` of the block two blocks ahead of blk (kBlk bytes per block): the software
// prefetch of the 3-8 row kernels, spread over their four passes over a superblock instead
// of issued in one burst before it. 8 rows, 1536x8960, one thread, from memory, 4
// alternations: Q4_K 538 -> 488 us, Q6_K 650 -> 626 (from L2 4-5% faster too); Q4_K 4
// rows from L2 16.2 -> 15.4 us. The burst stays for one and two rows. The NTA hint
// instead of T0: 8 rows from memory Q4_K 499.5 -> 492.5 us, Q6_K 635.5 -> 630.2 (minima
// 613 -> 565), from L2 level; engine 8-sequence decode, 6 and 5 alternated pairs, median
// ratios 1.022 (dense) and 1.023 (MoE).
// The whole block two blocks ahead of blk in one burst (past a panel's end: the next
// panel's first blocks, contiguous): the one- and two-row kernels, and small_batch's
// kernels that do not prefetch themselves. The loop stays rolled: unrolled, its 36
// prefetches went out back to back and the stream from memory read 0.75-0.9x.
template <size_t kBlk>
[[gnu::always_inline]] inline void prefetch_block(const uint8_t* blk) {
  const char* pf = reinterpret_cast<const char*>(blk) + 2 * kBlk;
#pragma GCC unroll 1
  for (size_t o = 0; o < kBlk; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
}

template <size_t kBlk>
[[gnu::always_inline]] inline void prefetch_quarter(const uint8_t* blk, int part) {
  constexpr size_t kLines = (kBlk + 255) / 256;
  const char* pf = reinterpret_cast<const char*>(blk) + 2 * kBlk + 64 * kLines * static_cast<size_t>(part);
  for (size_t o = 0; o < kLines; ++o) _mm_prefetch(pf + 64 * o, _MM_HINT_NTA);
}

// NT (1 or 2) activation rows against one packed Q4_K/Q5_K superblock of 16 rows, the
// quants decoded straight into the products: the same integer sums and float step as
// decode_quants_k4 + accumulate_k4<NT> (integer sums in any order are the same sums). The
// quant lines are read in address order (sub-block pair outer, g inner), each sub-block
// sum as two dpbusd chains (even and odd g) so that chains stay short; with g outer the
// stream jumped 512 bytes per load and read 8-18% less from memory (1536x8960, one
// token, 1 and 2 threads, in-process alternation). Two rows share each decoded register
// (unpacking the panel first and running the rows one after the other made 2 tokens
// cost 1.8x one from memory).
template <bool kHasQh, int NT>
[[gnu::always_inline]] inline void k4_tokens(const uint8_t* blk, const BlockQ8_K* const* a, __m512* acc) {
  PanelK4 p;
  packed_k4_scales(blk, p);
  __m512i sumi[NT];
  for (auto& x : sumi) x = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int pair = 0; pair < 4; ++pair) {
    __m512i s[NT][2][2];  // [token][lo/hi sub-block][g parity]
    for (auto& st : s)
      for (auto& sj : st) sj[0] = sj[1] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      __m512i lo, hi;
      packed_k4_line<kHasQh>(blk, pair, g, lo, hi);
      for (int t = 0; t < NT; ++t) {
        s[t][0][g % 2] = dpbusd_bcast(s[t][0][g % 2], lo, a[t]->qs + 32 * (2 * pair) + 4 * g);
        s[t][1][g % 2] = dpbusd_bcast(s[t][1][g % 2], hi, a[t]->qs + 32 * (2 * pair + 1) + 4 * g);
      }
    }
    for (int t = 0; t < NT; ++t)
      for (int h2 = 0; h2 < 2; ++h2)
        sumi[t] = _mm512_add_epi32(sumi[t],
                                   _mm512_mullo_epi32(_mm512_add_epi32(s[t][h2][0], s[t][h2][1]), p.sc[2 * pair + h2]));
  }
  __m512i summ[NT];
  bsum_pair_sums<NT>(p.mp, a, summ);
  for (int t = 0; t < NT; ++t) acc[t] = k4_block_step(acc[t], a[t]->d, p.d, p.dmin, sumi[t], summ[t]);
}

// The same for Q6_K (unpack_q6k_packed + accumulate_q6k<NT>), for any NT up to 8: each
// sub-block's four quant words (q6k_packed_words) feed one dpbusd chain per row, scaled
// once per sub-block. Quant lines are read in address order.
template <int NT>
[[gnu::always_inline]] inline void q6k_tokens(const uint8_t* blk, const BlockQ8_K* const* a, __m512* acc) {
  __m512i sumi[NT], off[NT];
  for (int t = 0; t < NT; ++t) sumi[t] = _mm512_setzero_si512();
  if constexpr (NT <= 2) {
    // All 16 sub-blocks unrolled: with a loop over the scales dwords (4 sub-blocks per
    // iteration) the one-row stream from memory read 0.9x.
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      __m512i w[4], s[NT];
      q6k_packed_words(blk, j, w);
      for (auto& x : s) x = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g)
        for (int t = 0; t < NT; ++t) s[t] = dpbusd_bcast(s[t], w[g], a[t]->qs + 16 * j + 4 * g);
      const __m512i sc = q6k_scale(q6k_packed_scales(blk, j / 4), j % 4);
      for (int t = 0; t < NT; ++t) sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(s[t], sc));
    }
  } else {
    // One row's chain at a time, so that the words stay in registers (with all rows'
    // chains live, 8 rows spilled); the loop over the scales dwords stays rolled (fully
    // unrolled, 8 rows ran 0.9x from L2).
#pragma GCC unroll 1
    for (int k = 0; k < 4; ++k) {
      prefetch_quarter<kPanelRows * sizeof(BlockQ6_K)>(blk, k);
      const __m512i scw = q6k_packed_scales(blk, k);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const int j = 4 * k + i;
        __m512i w[4];
        q6k_packed_words(blk, j, w);
        const __m512i sc = q6k_scale(scw, i);
        for (int t = 0; t < NT; ++t) {
          __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int g = 0; g < 4; ++g) s = dpbusd_bcast(s, w[g], a[t]->qs + 16 * j + 4 * g);
          sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(s, sc));
        }
      }
    }
  }
  __m512i sp[8];
  for (int k = 0; k < 4; ++k) {
    const __m512i scw = q6k_packed_scales(blk, k);
    sp[2 * k] = scale_pair(q6k_scale(scw, 0), q6k_scale(scw, 1));
    sp[2 * k + 1] = scale_pair(q6k_scale(scw, 2), q6k_scale(scw, 3));
  }
  bsum_pair_sums<NT>(sp, a, off);
  const __m512 d = q6k_block_d(blk);
  for (int t = 0; t < NT; ++t) acc[t] = q6k_block_step(acc[t], a[t]->d, d, sumi[t], off[t]);
}

// NT (4 or 8) activation rows (batched decode) against one packed Q4_K/Q5_K superblock:
// each sub-block pair's 8 quant lines are decoded into 16 registers and used by all rows at
// once, instead of unpacking the whole superblock into a PanelK4 in memory and reading it
// back (decode_quants_k4 + accumulate_k4<NT>: the same integer sums per sub-block, the same
// float step). The rolled unpack loop and its 64 stores were ~22% of the 8-row path's
// samples. Measured in the engine, dense model, binaries alternated: 8 sequences, ffn_dense
// per step 32.5/34.3/35.0/31.6 -> 29.8/29.0/28.0/29.9 ms, aggregate ratios median 1.035
// over 8 rounds; 3-7 rows as 4 + 2 + 1 (with the one- and two-row kernels), 4 sequences
// 1.16-1.17x and 6 sequences 1.09-1.16x. The Q6_K counterpart read 0.8-1.1x and was not kept.
template <bool kHasQh, int NT>
[[gnu::always_inline]] inline void k4_rows(const uint8_t* blk, const BlockQ8_K* const* a, __m512* acc) {
  constexpr size_t kBlk = kPanelRows * (kHasQh ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K));
  PanelK4 p;  // scales only
  packed_k4_scales(blk, p);
  __m512i sumi[NT];
  for (auto& x : sumi) x = _mm512_setzero_si512();
#pragma GCC unroll 1
  for (int pair = 0; pair < 4; ++pair) {
    prefetch_quarter<kBlk>(blk, pair);
    __m512i q[2][8];  // [lo/hi sub-block][g]
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) packed_k4_line<kHasQh>(blk, pair, g, q[0][g], q[1][g]);
#pragma GCC unroll 2
    for (int h2 = 0; h2 < 2; ++h2) {
      const int j = 2 * pair + h2;
      __m512i s[NT];
      for (auto& x : s) x = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g)
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) s[t] = dpbusd_bcast(s[t], q[h2][g], a[t]->qs + 32 * j + 4 * g);
      for (int t = 0; t < NT; ++t) sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(s[t], p.sc[j]));
    }
  }
  __m512i summ[NT];
  bsum_pair_sums<NT>(p.mp, a, summ);
  for (int t = 0; t < NT; ++t) acc[t] = k4_block_step(acc[t], a[t]->d, p.d, p.dmin, sumi[t], summ[t]);
}

// NT (1 or 2) activation rows against one packed Q2_K / Q3_K superblock of 16 rows, the
// quants decoded straight into the products (the same integer sums and float step as
// unpack_q2k/q3k_packed + accumulate_q2k / accumulate_q6k<NT, 2>). Each sub-block's four
// groups are one dpbusd chain per row; two sub-blocks' sums are packed into int16 pairs and
// scaled by one dpwssd (a mullo per sub-block ran Q3_K 15-20% slower).
template <bool kQ3, int NT>
[[gnu::always_inline]] inline void k23_tokens(const uint8_t* blk, const BlockQ8_K* const* a, __m512* acc) {
  const auto line = [&](int k) { return _mm512_loadu_si512(blk + 64 * k); };
  constexpr int kQs = kQ3 ? kPackedQ3kQs : kPackedQ2kQs;
  const auto qs = [&](int k) { return line(kQs + k); };
  std::conditional_t<kQ3, PanelQ6K, PanelQ2K> p;  // scales only (p.q stays unused)
  if constexpr (kQ3)
    packed_q3k_scales(blk, p);
  else
    packed_q2k_scales(blk, p);
  __m512i sumi[NT], off[NT];
  for (int t = 0; t < NT; ++t) sumi[t] = _mm512_setzero_si512();
  for (int k = 0; k < 8; ++k) {  // sub-blocks 2k and 2k + 1
    __m512i st[2][NT];
    for (int h = 0; h < 2; ++h) {
      const int j = 2 * k + h;
      for (int t = 0; t < NT; ++t) st[h][t] = _mm512_setzero_si512();
      for (int g = 0; g < 4; ++g) {
        __m512i q;
        if constexpr (kQ3)
          q = k3_group(qs, line, j, g);
        else
          q = k23_group(qs, j, g);
        for (int t = 0; t < NT; ++t) st[h][t] = dpbusd_bcast(st[h][t], q, a[t]->qs + 16 * j + 4 * g);
      }
    }
    // Both sums fit int16 (|.| <= 16 * 7 * 127): one int16 pair per row against the scale
    // pair (sc_2k, sc_2k+1), one dpwssd instead of two mullo and two adds.
    __m512i sc2;
    if constexpr (kQ3)
      sc2 = p.sp[k];
    else
      sc2 = _mm512_or_si512(p.sc[2 * k], _mm512_slli_epi32(p.sc[2 * k + 1], 16));
    for (int t = 0; t < NT; ++t) {
      const __m512i pair = _mm512_ternarylogic_epi32(st[0][t], _mm512_set1_epi32(0xFFFF),
                                                     _mm512_slli_epi32(st[1][t], 16), 0xEA);  // (a & b) | c
      sumi[t] = _mm512_dpwssd_epi32(sumi[t], pair, sc2);
    }
  }
  if constexpr (kQ3) {
    bsum_pair_sums<NT>(p.sp, a, off);
    for (int t = 0; t < NT; ++t) acc[t] = q6k_block_step<2>(acc[t], a[t]->d, p.d, sumi[t], off[t]);
  } else {
    bsum_pair_sums<NT>(p.mp, a, off);
    for (int t = 0; t < NT; ++t) acc[t] = k4_block_step(acc[t], a[t]->d, p.d, p.dmin, sumi[t], off[t]);
  }
}

template <class WB, bool kHasQh>
struct KindK4 {
  using Panel = PanelK4;
  static constexpr size_t kBlockBytes = sizeof(WB);
  static void unpack(const uint8_t* blk, Panel& p) { unpack_k4_packed<WB, kHasQh>(blk, p); }
  template <int NT>
  static void fused(const uint8_t* blk, const BlockQ8_K* const* a, __m512* acc) {
    k4_tokens<kHasQh, NT>(blk, a, acc);
  }
  template <int NT>
  static void accumulate(const Panel& p, const BlockQ8_K* const* a, __m512* acc) {
    accumulate_k4<NT>(p, a, acc);
  }
  static constexpr bool kFusedRows = true;  // 4 and 8 rows: k4_rows
  static constexpr int kFusedMaxRows = 2;   // 3-8 rows by small_batch
  template <int NT>
  static void rows(const uint8_t* blk, const BlockQ8_K* const* a, __m512* acc) {
    k4_rows<kHasQh, NT>(blk, a, acc);
  }
};

// Every row count up to 8 by q6k_tokens (fused_rows); nothing unpacks the panel.
struct KindQ6K {
  static constexpr size_t kBlockBytes = sizeof(BlockQ6_K);
  template <int NT>
  static void fused(const uint8_t* blk, const BlockQ8_K* const* a, __m512* acc) {
    q6k_tokens<NT>(blk, a, acc);
  }
  static constexpr int kFusedMaxRows = 8;
};

template <bool kQ3>
struct KindK23 {
  using Panel = std::conditional_t<kQ3, PanelQ6K, PanelQ2K>;
  static constexpr size_t kBlockBytes = kQ3 ? sizeof(BlockQ3_K) : sizeof(BlockQ2_K);
  static void unpack(const uint8_t* blk, Panel& p) {
    if constexpr (kQ3)
      unpack_q3k_packed(blk, p);
    else
      unpack_q2k_packed(blk, p);
  }
  template <int NT>
  static void fused(const uint8_t* blk, const BlockQ8_K* const* a, __m512* acc) {
    k23_tokens<kQ3, NT>(blk, a, acc);
  }
  template <int NT>
  static void accumulate(const Panel& p, const BlockQ8_K* const* a, __m512* acc) {
    if constexpr (kQ3)
      accumulate_q6k<NT, 2>(p, a, acc);
    else
      accumulate_q2k<NT>(p, a, acc);
  }
  static constexpr bool kFusedRows = false;
  static constexpr int kFusedMaxRows = 2;
};

// Panels [pb, pe) x NT (1 or 2) activation rows with the fused kernels: the loop of
// small_batch below without its row-count dispatch and per-row pointer set-up, which kept
// the out-of-order window from overlapping consecutive superblocks of the one-row kernel
// (~300 instructions each). From 3 rows (Q6_K) the kernel prefetches itself.
template <class Kind, int NT>
void fused_rows(const MatmulArgs& m, int64_t pb, int64_t pe) {
  constexpr size_t kBlk = kPanelRows * Kind::kBlockBytes;
  const int64_t nb = m.n_in / kQK_K;
  for (int64_t r = pb; r < pe; r += kPanelRows) {
    const uint8_t* blk = packed_panel(m, r);
    const BlockQ8_K* a[NT];  // each row's block ib, advanced with blk
    for (int t = 0; t < NT; ++t)
      a[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
    __m512 acc[NT];
    for (auto& x : acc) x = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib, blk += kBlk) {
      if constexpr (NT <= 2) prefetch_block<kBlk>(blk);
      Kind::template fused<NT>(blk, a, acc);
      for (auto& x : a) ++x;
    }
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(m.out + t * m.out_stride + r, acc[t]);
  }
}

// Panels [pb, pe) (rows, multiples of 16) x activation rows [0, nt), 3 <= nt <= kSmallMaxTok,
// one panel after the other (one sequential stream) with a software prefetch two blocks
// ahead; Q4_K/Q5_K take k4_rows for 8 rows, and for 3-7 only where kMidRows (see
// small_batch_kind), Q2_K and Q3_K unpack each superblock.
template <class Kind, bool kMidRows = false>
void small_batch(const MatmulArgs& m, int64_t pb, int64_t pe) {
  const int64_t nt = m.n_tok, nb = m.n_in / kQK_K;
  const auto* act = static_cast<const uint8_t*>(m.act);
  const BlockQ8_K* a[kSmallMaxTok];
  typename Kind::Panel p;
  // k4_rows (8 rows, or 4 of 3-7) prefetches each block itself (prefetch_quarter).
  const bool rows_prefetch = Kind::kFusedRows && (nt == 8 || (kMidRows && nt >= 4));
  for (int64_t r = pb; r < pe; r += kPanelRows) {
    const uint8_t* pk = packed_panel(m, r);
    __m512 acc[kSmallMaxTok];
    for (int64_t t = 0; t < nt; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
      const uint8_t* blk = pk + static_cast<size_t>(ib) * kPanelRows * Kind::kBlockBytes;
      if (!rows_prefetch) prefetch_block<kPanelRows * Kind::kBlockBytes>(blk);
      for (int64_t t = 0; t < nt; ++t) a[t] = reinterpret_cast<const BlockQ8_K*>(act + t * m.act_row_stride) + ib;
      if constexpr (Kind::kFusedRows) {
        if (nt == 8) {
          Kind::template rows<8>(blk, a, acc);
          continue;
        }
      }
      if constexpr (kMidRows) {  // 3-7 rows: 4 + 2 + 1 of them, never unpacked
        int64_t t = 0;
        if (nt >= 4) {
          Kind::template rows<4>(blk, a, acc);
          t = 4;
        }
        if (nt - t >= 2) {
          Kind::template fused<2>(blk, a + t, acc + t);
          t += 2;
        }
        if (t < nt) Kind::template fused<1>(blk, a + t, acc + t);
        continue;
      }
      Kind::unpack(blk, p);
      int64_t t = 0;
      if (nt == 8) {
        Kind::template accumulate<8>(p, a, acc);
        continue;
      }
      if (nt >= 4) {
        Kind::template accumulate<4>(p, a, acc);
        t = 4;
      }
      for (; t < nt; ++t) Kind::template accumulate<1>(p, a + t, acc + t);
    }
    for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(m.out + t * m.out_stride + r, acc[t]);
  }
}

// One or two activation rows against packed 32-block panels, one panel after the other with
// the prefetch above. The panel kernels' form for the offset types (signed weights against
// activations biased by 128, each block's -128 * sum(w) from 8 more dpbusd) costs as much as
// the product itself for one row; here the weights are unsigned (Q4_0/Q5_0: q, 0..15 or
// 0..31; Q8_0: w + 128 by an xor) against the signed activation, and the offset (8, 16 or
// 128) comes back as offset * (the activation block's sum), computed once per call. Q4_1 /
// Q5_1 weights are unsigned already (x = d q + m against Q8_1 activations: + m * s_a). The
// same exact integer sum per (row, block), then the reference's float step ([QUANT_EXACT]).
constexpr int64_t kFused32MaxBlocks = 1024;  // activation sums on the stack: n_in <= 32768

template <GgmlType kType, int NT>
void small_batch32_fused(const MatmulArgs& m, int64_t pb, int64_t pe) {
  constexpr bool kQ8 = kType == GgmlType::Q8_0, kMin = kType == GgmlType::Q4_1 || kType == GgmlType::Q5_1;
  constexpr bool kQh = kType == GgmlType::Q5_0 || kType == GgmlType::Q5_1;
  using WB = std::conditional_t<kQ8, BlockQ8_0,
                                std::conditional_t<kMin, std::conditional_t<kQh, BlockQ5_1, BlockQ4_1>,
                                                   std::conditional_t<kQh, BlockQ5_0, BlockQ4_0>>>;
  using AB = std::conditional_t<kMin, BlockQ8_1, BlockQ8_0>;
  constexpr int kDwords = (sizeof(WB) - (kMin ? 4 : 2)) / 4, kOffShift = kQ8 ? 7 : (kQh ? 4 : 3);
  constexpr size_t kBlk = kPanelRows * sizeof(WB);
  // Prefetch whole blocks ~4.5 KB ahead, as far as two Q4_K superblocks: two of these much
  // smaller blocks (288-544 bytes) ahead, the stream from memory read 0.8-0.95x (1 thread,
  // 1536x8960, one row: Q4_0 319-333 -> 266-267 us, Q5_0 392-410 -> 338-342, Q8_0 524-536 ->
  // 506-513; 9 KB ahead no better).
  constexpr size_t kPfAhead = (4608 + kBlk - 1) / kBlk * kBlk;
  const int64_t nb = m.n_in / 32;
  const AB* a[NT];
  // Per token and block, once per call: the activation's d, and its sum (offset types, as
  // int) or its s = d * sum (Q4_1/Q5_1, as float).
  float ad[NT][kFused32MaxBlocks];
  std::conditional_t<kMin, float, int32_t> asum[NT][kFused32MaxBlocks];
  for (int t = 0; t < NT; ++t) {
    a[t] = reinterpret_cast<const AB*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
    for (int64_t ib = 0; ib < nb; ++ib) {
      ad[t][ib] = half_to_float(a[t][ib].d);
      if constexpr (kMin) {
        asum[t][ib] = half_to_float(a[t][ib].s);
        continue;
      }
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][ib].qs));
      const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);  // pairs, exact
      asum[t][ib] = hsum_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
    }
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16), bias = _mm512_set1_epi8(-128);
  for (int64_t r = pb; r < pe; r += kPanelRows) {
    const uint8_t* pk = packed_panel(m, r);
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
      const uint8_t* blk = pk + static_cast<size_t>(ib) * kBlk;
      const char* pf = reinterpret_cast<const char*>(blk) + kPfAhead;
      for (size_t o = 0; o < kBlk; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
      __m512i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_si512();
      if constexpr (kQ8) {
        for (int g = 0; g < 8; ++g) {  // elements 4g..4g+3
          const __m512i w = _mm512_xor_si512(_mm512_loadu_si512(blk + 64 * g), bias);
          for (int t = 0; t < NT; ++t) s[t] = dpbusd_bcast(s[t], w, a[t][ib].qs + 4 * g);
        }
      } else {
        __mmask64 set[8];
        if constexpr (kQh) fifth_bit_masks(_mm512_loadu_si512(blk), set);
        for (int k = 0; k < 4; ++k) {
          const __m512i v = _mm512_loadu_si512(blk + 64 * (k + (kQh ? 1 : 0)));
          __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), m4);
          if constexpr (kQh) {
            lo = _mm512_mask_add_epi8(lo, set[k], lo, sixteen);
            hi = _mm512_mask_add_epi8(hi, set[k + 4], hi, sixteen);
          }
          for (int t = 0; t < NT; ++t) {  // elements 4k.. (low nibbles) and 16 + 4k.. (high)
            s[t] = dpbusd_bcast(s[t], lo, a[t][ib].qs + 4 * k);
            s[t] = dpbusd_bcast(s[t], hi, a[t][ib].qs + 16 + 4 * k);
          }
        }
      }
      if constexpr (kMin) {  // d | m per row: the reference's float(sumi) * (d_w * d_a) + m_w * s_a
        const __m512i dm = _mm512_loadu_si512(blk + 64 * kDwords);
        const __m512 d = half_lo(dm), mw = half_hi(dm);
        for (int t = 0; t < NT; ++t) {
          const __m512 step = _mm512_mul_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(d, _mm512_set1_ps(ad[t][ib])));
          acc[t] = _mm512_add_ps(acc[t], _mm512_add_ps(step, _mm512_mul_ps(mw, _mm512_set1_ps(asum[t][ib]))));
        }
      } else {
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * kDwords)));
        for (int t = 0; t < NT; ++t) {
          const __m512i sumi = _mm512_sub_epi32(s[t], _mm512_set1_epi32(asum[t][ib] << kOffShift));
          acc[t] = _mm512_add_ps(acc[t],
                                 _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), _mm512_mul_ps(d, _mm512_set1_ps(ad[t][ib]))));
        }
      }
    }
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(m.out + t * m.out_stride + r, acc[t]);
  }
}

// The 32-block types: one or two rows as above, more rows (or longer rows than the
// activation sums' stack arrays hold) by the panel kernels, which read packed blocks with
// plain loads and prefetch each panel's stream; one panel at a time.
template <GgmlType kType>
void small_batch32(const MatmulArgs& m, int64_t pb, int64_t pe) {
  if (m.n_in / 32 <= kFused32MaxBlocks && m.n_tok <= 2)
    return m.n_tok == 1 ? small_batch32_fused<kType, 1>(m, pb, pe) : small_batch32_fused<kType, 2>(m, pb, pe);
  MatmulArgs one = m;
  for (int64_t r = pb; r < pe; r += kPanelRows) {
    one.row_end = r + kPanelRows;  // a 16-row range: panel_matmul runs single panels
    panel_matmul(one, r, 0, m.n_tok);
  }
}

// One kind's rows: up to Kind::kFusedMaxRows (two; Q6_K all 8) by fused_rows; 3-7 rows of
// Q4_K/Q5_K in their own instantiation of small_batch (with that branch in the same loop
// the 8-row path read 0.79-0.98x, 10 alternations); the rest by small_batch.
// fused_rows<Kind, NT> for NT = m.n_tok (1 <= NT <= sizeof...(N)).
template <class Kind, int... N>
void fused_rows_n(const MatmulArgs& m, int64_t pb, int64_t pe, std::integer_sequence<int, N...>) {
  using Fn = void (*)(const MatmulArgs&, int64_t, int64_t);
  static constexpr Fn kFns[] = {&fused_rows<Kind, N + 1>...};
  kFns[m.n_tok - 1](m, pb, pe);
}

template <class Kind>
void small_batch_kind(const MatmulArgs& m, int64_t pb, int64_t pe) {
  static_assert(Kind::kFusedMaxRows <= kSmallMaxTok);
  if (m.n_tok <= Kind::kFusedMaxRows)
    return fused_rows_n<Kind>(m, pb, pe, std::make_integer_sequence<int, Kind::kFusedMaxRows>{});
  if constexpr (Kind::kFusedMaxRows < kSmallMaxTok) {
    if constexpr (Kind::kFusedRows) {
      if (m.n_tok <= 7) return small_batch<Kind, true>(m, pb, pe);
    }
    small_batch<Kind>(m, pb, pe);
  }
}

void small_batch_dispatch(const MatmulArgs& m, int64_t pb, int64_t pe) {
  switch (m.wtype) {
    case GgmlType::Q4_K:
      return small_batch_kind<KindK4<BlockQ4_K, false>>(m, pb, pe);
    case GgmlType::Q5_K:
      return small_batch_kind<KindK4<BlockQ5_K, true>>(m, pb, pe);
    case GgmlType::Q6_K:
      return small_batch_kind<KindQ6K>(m, pb, pe);
    case GgmlType::Q2_K:
      return small_batch_kind<KindK23<false>>(m, pb, pe);
    case GgmlType::Q3_K:
      return small_batch_kind<KindK23<true>>(m, pb, pe);
    case GgmlType::Q4_0:
      return small_batch32<GgmlType::Q4_0>(m, pb, pe);
    case GgmlType::Q5_0:
      return small_batch32<GgmlType::Q5_0>(m, pb, pe);
    case GgmlType::Q8_0:
      return small_batch32<GgmlType::Q8_0>(m, pb, pe);
    case GgmlType::Q4_1:
      return small_batch32<GgmlType::Q4_1>(m, pb, pe);
    case GgmlType::Q5_1:
      return small_batch32<GgmlType::Q5_1>(m, pb, pe);
    default:
      return;
  }
}

}  // namespace

void packed_matmul(const MatmulArgs& m) {
  // The 16-aligned rows of the range read the packed panels; an unaligned head or tail
  // (the matrix's last n_out % 16 rows are never packed) goes the unpacked way.
  const int64_t pb = (m.row_begin + kPanelRows - 1) / kPanelRows * kPanelRows;
  const int64_t pe = std::max(pb, m.row_end / kPanelRows * kPanelRows);
  MatmulArgs plain = m;
  plain.w_panels = nullptr;
  if (pb > m.row_begin) {
    plain.row_begin = m.row_begin;
    plain.row_end = std::min(pb, m.row_end);
    matmul(plain);
  }
  if (pb >= pe) return;
  if (pe < m.row_end) {
    plain.row_begin = pe;
    plain.row_end = m.row_end;
    matmul(plain);
  }
  if (m.n_tok <= kSmallMaxTok) return small_batch_dispatch(m, pb, pe);
  MatmulArgs mid = m;
  mid.row_begin = pb;
  mid.row_end = pe;
  for (int64_t t0 = 0; t0 < m.n_tok; t0 += kPanelMaxTok) {
    const int64_t nt = std::min(kPanelMaxTok, m.n_tok - t0);
    for (int64_t r = pb; r < pe;) r += panel_matmul(mid, r, t0, nt);
  }
}

}  // namespace ds::avx512
