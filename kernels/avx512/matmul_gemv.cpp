// AVX-512 decode GEMV for the K-quants: one activation row against 4 weight rows per pass
// (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) when the weights are not repacked (--no-repack, AVX2-era
// layouts, the rows past the last 16-row panel); Q4_0 and Q5_0 are in matmul_gemv32.cpp.
// Measured numbers: docs/performance.md.
//
// Memory: a pass takes one row from each quarter of the caller's row range (gemv_rows),
// so a thread reads 4 sequential streams, each followed by the hardware prefetcher. One
// stream per core read ~19 GB/s on the 2-core Zen 5 test host, four ~32; adjacent rows
// with a software prefetch ahead behaved like one stream. Compute: instructions per weight byte
// decide the speed from cache, so the formulation differs from the tile loop (dot_blocks.h):
// - products with VNNI dpbusd (u8 weights x s8 activations, 4 per int32 lane) instead of
//   maddubs + dpwssd: a lane sums 4 elements of one sub-block, at most 4 * 63 * 128 in
//   magnitude, so two dpbusd results pack (packssdw, no saturation) into one register of
//   int16 lanes and one dpwssd applies the sub-block scales to both (6 multiplies per
//   block instead of 8);
// - Q4_K/Q5_K: the 4 rows' scale bytes are decoded together, one 128-bit lane per row;
//   the activation block is loaded (and put into the weights' storage order) once for
//   the 4 rows, and the rows' integer sums are reduced together by a transposing tree.
//
// [KQUANT_EXACT]: per (row, block) the integer sums are exact and the float operations
// are the reference's, in its order (Q4_K/Q5_K: dall * sumi - dmin * summ; Q6_K:
// (d_a * d) * sumi; then the running sum), one lane per row, so results are bit-identical
// to kernels/ref and to the tile loop in matmul.cpp ([BATCH_INVARIANT] whichever path a
// row takes). tests/kernels/isa_vs_ref_test.cpp DecodeGemvBitExact checks it.
#include "kernels/avx512/intrinsics.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/avx512/dot_blocks.h"
#include "kernels/avx512/gemv_common.h"
#include "kernels/avx512/kernels_avx512.h"

namespace ds::avx512 {
namespace {

using namespace gemv;

// The 4 rows' [sc0..sc7, m0..m7] bytes (SPEC.md "Block formats"), one 128-bit lane per
// row, from lanes [d dmin | q0..3 | q4..7 | q8..11] (the first 16 bytes of a block):
//   sc0..3 = w0 & 63, m0..3 = w1 & 63,
//   sc4..7 = (w2 & 0xF) | ((w0 >> 6) << 4), m4..7 = (w2 >> 4) | ((w1 >> 6) << 4).
inline __m512i k4_scales_mins_x4(__m512i x) {
  const __m512i a = _mm512_srlv_epi32(_mm512_shuffle_epi32(x, static_cast<_MM_PERM_ENUM>(0xED)),  // w0 w2 w1 w2
                                      _mm512_set4_epi32(4, 0, 0, 0));
  const __m512i b = _mm512_srli_epi32(_mm512_shuffle_epi32(x, static_cast<_MM_PERM_ENUM>(0xA5)), 2);  // w0 w0 w1 w1
  const __m512i hi2 = _mm512_and_si512(b, _mm512_set4_epi32(0x30303030, 0, 0x30303030, 0));
  // (a & mask) | hi2
  return _mm512_ternarylogic_epi32(a, hi2, _mm512_set4_epi32(0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F), 0xEC);
}

// Q4_K and Q5_K. In a row's 64 bytes qs[64h..64h+63] the low nibbles are elements
// [128h, 128h+32) ++ [128h+64, 128h+96) (sub-blocks 4h, 4h+2), the high nibbles
// [128h+32, 128h+64) ++ [128h+96, 128h+128) (sub-blocks 4h+1, 4h+3): the activation is
// permuted into that order once per block. After dpbusd, int32 lanes 0-7 belong to the
// first sub-block of a register, 8-15 to the second; packs(lo, hi) puts in 128-bit chunk
// c the lanes 4c..4c+3 of lo, then of hi, so int16 lane i of the packed register is
// sub-block 4h + 2 * (i >= 16) + (i % 8 >= 4). Q5_K: the 5th bit of sub-block j's
// element l is bit j of qh[l].
template <class WB, bool kHasQh>
void gemv4_k4(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // idx_sc[2h + rr]: scales for register pair h of row rr (0, 1) of a 2-row int16 vector.
  const auto sc = [](int h, int rr) {
    return idx16([=](int i) { return 16 * rr + 4 * h + 2 * (i >= 16) + (i % 8 >= 4); });
  };
  static const __m512i idx_sc[4] = {sc(0, 0), sc(0, 1), sc(1, 0), sc(1, 1)};
  // d0..d3, dmin0..dmin3 out of the 4 heads (words 0 and 1 of each 128-bit lane).
  static const __m512i idx_dd = idx16([](int i) { return i < 8 ? 8 * (i % 4) + i / 4 : 0; });
  __m512i bit5[4];  // register k's qh bits: sub-blocks (4h, 4h+2) low nibbles, (4h+1, 4h+3) high
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 2; ++k)
      bit5[2 * h + k] =
          _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(static_cast<char>(1 << (4 * h + k))),
                                 _mm512_set1_epi8(static_cast<char>(1 << (4 * h + k + 2))));
  const __m512i sixteen = _mm512_set1_epi8(16);
  __m128 acc = _mm_setzero_ps();
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    __m512i av[4];
    for (int h = 0; h < 2; ++h) {
      const __m512i x0 = _mm512_loadu_si512(ab.qs + 128 * h), x1 = _mm512_loadu_si512(ab.qs + 128 * h + 64);
      av[2 * h] = _mm512_shuffle_i64x2(x0, x1, 0x44);
      av[2 * h + 1] = _mm512_shuffle_i64x2(x0, x1, 0xEE);
    }
    // Sums of the 8 sub-blocks of 32 (bsums pairs) in int16 lanes 8..15 of each 16-lane
    // half, where the mins sit in the scale vectors below; zero elsewhere.
    const __m256i bs16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));
    const __m128i bs8 = _mm256_cvtepi32_epi16(_mm256_madd_epi16(bs16, _mm256_set1_epi16(1)));
    const __m512i bsum_m = _mm512_maskz_mov_epi16(0xFF00FF00u, _mm512_broadcast_i32x4(bs8));
    const uint8_t* wb = w0 + ib * sizeof(WB);
    const __m512i heads = load4x16(wb, ws);  // d, dmin, scales[12] of each row
    const __m512i scm = k4_scales_mins_x4(heads);
    const __m512i sm[2] = {_mm512_cvtepu8_epi16(_mm512_castsi512_si256(scm)),
                           _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(scm, 1))};
    __m512i s[kRows];
    for (int r = 0; r < kRows; ++r) {
      const WB& b = *reinterpret_cast<const WB*>(wb + r * ws);
      __m512i acc_r = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i v = _mm512_loadu_si512(b.qs + 64 * h);
        __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (kHasQh) {
          const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
          lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, bit5[2 * h]), lo, sixteen);
          hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh, bit5[2 * h + 1]), hi, sixteen);
        }
        const __m512i dl = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, av[2 * h]);
        const __m512i dh = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, av[2 * h + 1]);
        acc_r = _mm512_dpwssd_epi32(acc_r, _mm512_packs_epi32(dl, dh),
                                    _mm512_permutexvar_epi16(idx_sc[2 * h + (r & 1)], sm[r / 2]));
      }
      s[r] = acc_r;
    }
    const __m128i sumi = reduce_rows4(s);
    // Mins: rows 0, 1 in int32 lanes 4-7 and 12-15 of the first product, rows 2, 3 of the
    // second; their 128-bit chunks 1 and 3 gathered as [row 0, 1, 2, 3].
    const __m512i mn01 = _mm512_madd_epi16(sm[0], bsum_m), mn23 = _mm512_madd_epi16(sm[1], bsum_m);
    const __m128i summ = reduce_chunks4(_mm512_shuffle_i32x4(mn01, mn23, 0xDD));
    const __m256 dm = _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi16(idx_dd, heads)));
    const __m128 ad = _mm_set1_ps(ab.d);
    const __m128 dall = _mm_mul_ps(ad, _mm256_castps256_ps128(dm)), dmin = _mm_mul_ps(ad, _mm256_extractf128_ps(dm, 1));
    acc = _mm_add_ps(acc, _mm_sub_ps(_mm_mul_ps(dall, _mm_cvtepi32_ps(sumi)), _mm_mul_ps(dmin, _mm_cvtepi32_ps(summ))));
  }
  store_rows4(m.out + t * m.out_stride + r0, rstep, acc);
}

// Q6_K: ql[64h + l] low nibble = element 128h + l (l < 64), high nibble = 128h + 64 + l;
// qh[32h + l] bits 0-1, 2-3, 4-5, 6-7 = high bits of elements 128h + l, +32, +64, +96. So
// register 2h holds elements 128h + [0, 64) and 2h + 1 holds 128h + 64 + [0, 64), in the
// activation's order. dpbusd lane i of register k is sub-block 4k + i / 4 (16 elements);
// packs(reg 2h, reg 2h + 1) int16 lane i is sub-block 8h + (i / 8) + 4 * (i % 8 >= 4).
// q - 32 is applied through the bsums: sumi = sum sc_j * dot_j - 32 * sum sc_j * bsums_j.
// The 4 rows of a pass share the activation loads; each row keeps its own running sum.
void gemv4_q6k(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  static const __m512i idx_sc[2] = {idx16([](int i) { return i / 8 + 4 * (i % 8 >= 4); }),
                                    idx16([](int i) { return 8 + i / 8 + 4 * (i % 8 >= 4); })};
  const __m512i sh_lo = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(4), _mm512_set1_epi16(2));
  const __m512i sh_hi = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(0), _mm512_set1_epi16(2));
  float acc[kRows] = {};
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    const __m512i av[4] = {_mm512_loadu_si512(ab.qs), _mm512_loadu_si512(ab.qs + 64), _mm512_loadu_si512(ab.qs + 128),
                           _mm512_loadu_si512(ab.qs + 192)};
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));
    for (int r = 0; r < kRows; ++r) {
      const BlockQ6_K& b = reinterpret_cast<const BlockQ6_K*>(w0 + r * ws)[ib];
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
      const __m512i sc = _mm512_castsi256_si512(sc16);
      __m512i acc_r = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i ql = _mm512_loadu_si512(b.ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
        const __m512i q0 = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4), _mm512_sllv_epi16(qh, sh_lo), m30, 0xF8);
        const __m512i q1 = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                                     _mm512_srlv_epi16(qh, sh_hi), m30, 0xF8);
        const __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q0, av[2 * h]);
        const __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q1, av[2 * h + 1]);
        acc_r = _mm512_dpwssd_epi32(acc_r, _mm512_packs_epi32(d0, d1), _mm512_permutexvar_epi16(idx_sc[h], sc));
      }
      int sumi, soff;
      hsum2_epi32(acc_r, _mm256_madd_epi16(bsums, sc16), &sumi, &soff);
      sumi -= soff << 5;
      acc[r] += (ab.d * half_to_float(b.d)) * static_cast<float>(sumi);
    }
  }
  store_rows4(m.out + t * m.out_stride + r0, rstep, _mm_loadu_ps(acc));
}

// Q2_K and Q3_K: element 128n + 32s + l is bits 2s..2s+1 of qs[32n + l]; Q3_K adds bit
// 4n + s of hmask[l] as a third bit, kept here as q + 4 (0..7; the -4 goes through the
// bsums as Q6_K's -32 does). A row's 64 qs bytes are one register: field s, (qs >> 2s) & 3,
// holds elements 32s + [0, 32) in its low half and 128 + 32s + [0, 32) in its high half,
// and the activation is loaded in that order once per block for the 4 rows. dpbusd int32
// lane L of field f covers sub-block 2f + L / 4 (L < 8) or 8 + 2f + (L - 8) / 4; in
// packs(field 2p, field 2p + 1), int16 lane i comes from chunk c = i / 8 of field
// 2p + (i % 8 >= 4): sub-block 8 * (c >= 2) + 2 * field + c % 2. Lanes stay below
// 4 * 7 * 128 in magnitude, so the packing cannot saturate.
// Q2_K: sumi = sum (sc_j & 15) * dot_j, summ = sum (sc_j >> 4) * bsums_j, then the
// reference's dall * sumi - dmin * summ. Q3_K: sumi = sum sc_j * dot_j - 4 * sum sc_j *
// bsums_j, then (d_a * d) * sumi.
// The 16 signed Q3_K scales of 4 rows (kernels/ref q3_k_scales) as bytes, row r in 128-bit
// lane r, from each row's bytes 94..109 (qs[62..63], scales[0..11], d): low 4 bits from
// the low (j < 8) or high (j >= 8) nibble of scales[j % 8], high 2 bits from scales[8 + j % 4]
// at bit 2 (j / 4); minus 32.
inline __m512i q3k_scales_x4(__m512i raw) {
  const __m512i lo_src =
      _mm512_shuffle_epi8(raw, _mm512_broadcast_i32x4(_mm_setr_epi8(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9)));
  const __m512i hi_src = _mm512_shuffle_epi8(
      raw, _mm512_broadcast_i32x4(_mm_setr_epi8(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13)));
  const __m512i lo = _mm512_and_si512(
      _mm512_mask_blend_epi8(0xFF00FF00FF00FF00ull, lo_src, _mm512_srli_epi16(lo_src, 4)), _mm512_set1_epi8(0x0F));
  __m512i hi = _mm512_mask_blend_epi8(0x00F000F000F000F0ull, hi_src, _mm512_srli_epi16(hi_src, 2));
  hi = _mm512_mask_blend_epi8(0x0F000F000F000F00ull, hi, _mm512_srli_epi16(hi_src, 4));
  hi = _mm512_mask_blend_epi8(0xF000F000F000F000ull, hi, _mm512_srli_epi16(hi_src, 6));
  hi = _mm512_slli_epi16(_mm512_and_si512(hi, _mm512_set1_epi8(0x03)), 4);
  return _mm512_sub_epi8(_mm512_or_si512(lo, hi), _mm512_set1_epi8(32));
}

template <bool kQ3>
void gemv4_k23(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  using WB = std::conditional_t<kQ3, BlockQ3_K, BlockQ2_K>;
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
  static const __m512i idx_sc[2] = {
      idx16([](int i) { return 8 * (i / 8 >= 2) + 2 * (i % 8 >= 4) + (i / 8) % 2; }),
      idx16([](int i) { return 8 * (i / 8 >= 2) + 2 * (2 + (i % 8 >= 4)) + (i / 8) % 2; })};
  __m512i hbit[4];  // Q3_K: the hmask bit of field s, bit s for the low half, 4 + s for the high
  for (int f = 0; f < 4; ++f)
    hbit[f] = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(static_cast<char>(1 << f)),
                                     _mm512_set1_epi8(static_cast<char>(1 << (4 + f))));
  __m128 acc = _mm_setzero_ps();
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    __m512i av[4];
    for (int f = 0; f < 4; ++f)
      av[f] = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 32 * f))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 128 + 32 * f)), 1);
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));
    const uint8_t* wb = w0 + ib * sizeof(WB);
    __m512i s[kRows];
    __m256i off[kRows];          // per row: 8 int32 partials of sum offset_j * bsums_j
    uint32_t dd[kRows] = {};     // Q2_K, per row: d and dmin as fp16 bits
    alignas(64) int8_t sc3[64];  // Q3_K: row r's 16 scales at 16 r
    __m128 d3;                   // Q3_K: the 4 rows' d
    if constexpr (kQ3) {
      const __m512i raw = load4x16(wb + offsetof(BlockQ3_K, scales) - 2, ws);
      _mm512_store_si512(sc3, q3k_scales_x4(raw));
      d3 = _mm_cvtph_ps(
          _mm512_castsi512_si128(_mm512_permutexvar_epi16(_mm512_setr4_epi32(0x000F0007, 0x001F0017, 0, 0), raw)));
    }
    for (int r = 0; r < kRows; ++r) {
      const WB& b = *reinterpret_cast<const WB*>(wb + r * ws);
      const __m512i v = _mm512_loadu_si512(b.qs);
      __m512i hm;
      if constexpr (kQ3) hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)));
      __m512i d[4];
      for (int f = 0; f < 4; ++f) {
        __m512i q = _mm512_and_si512(f == 0 ? v : _mm512_srli_epi16(v, 2 * f), m3);
        if constexpr (kQ3) q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hm, hbit[f]), q, four);
        d[f] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, av[f]);
      }
      __m256i sc16, off16;
      if constexpr (kQ3) {
        sc16 = off16 = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(sc3 + 16 * r)));
      } else {
        const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
        sc16 = _mm256_and_si256(sm, _mm256_set1_epi16(15));
        off16 = _mm256_srli_epi16(sm, 4);
      }
      const __m512i sc = _mm512_castsi256_si512(sc16);
      s[r] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_packs_epi32(d[0], d[1]),
                                                     _mm512_permutexvar_epi16(idx_sc[0], sc)),
                                 _mm512_packs_epi32(d[2], d[3]), _mm512_permutexvar_epi16(idx_sc[1], sc));
      off[r] = _mm256_madd_epi16(bsums, off16);
      if constexpr (!kQ3) std::memcpy(&dd[r], &b.d, 2 * sizeof(half_t));
    }
    // Row r's sums in lane r: the products, then the offsets (rows 0, 1 and 2, 3 side by side,
    // chunk pairs added so that chunk r holds row r).
    const __m128i sumi = reduce_rows4(s);
    const __m512i o01 = _mm512_inserti64x4(_mm512_castsi256_si512(off[0]), off[1], 1);
    const __m512i o23 = _mm512_inserti64x4(_mm512_castsi256_si512(off[2]), off[3], 1);
    const __m128i soff =
        reduce_chunks4(_mm512_add_epi32(_mm512_shuffle_i32x4(o01, o23, 0x88), _mm512_shuffle_i32x4(o01, o23, 0xDD)));
    const __m128 ad = _mm_set1_ps(ab.d);
    if constexpr (kQ3) {
      const __m128i si = _mm_sub_epi32(sumi, _mm_slli_epi32(soff, 2));
      acc = _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(ad, d3), _mm_cvtepi32_ps(si)));
    } else {
      const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dd)));  // d0 m0 d1 m1 ...
      const __m128 d4 = _mm_shuffle_ps(_mm256_castps256_ps128(dm), _mm256_extractf128_ps(dm, 1), 0x88);
      const __m128 m4 = _mm_shuffle_ps(_mm256_castps256_ps128(dm), _mm256_extractf128_ps(dm, 1), 0xDD);
      const __m128 dall = _mm_mul_ps(ad, d4), dmin = _mm_mul_ps(ad, m4);
      acc =
          _mm_add_ps(acc, _mm_sub_ps(_mm_mul_ps(dall, _mm_cvtepi32_ps(sumi)), _mm_mul_ps(dmin, _mm_cvtepi32_ps(soff))));
    }
  }
  store_rows4(m.out + t * m.out_stride + r0, rstep, acc);
}

Gemv4Fn gemv_pass(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K:
      return gemv4_k23<false>;
    case GgmlType::Q3_K:
      return gemv4_k23<true>;
    case GgmlType::Q4_K:
      return gemv4_k4<BlockQ4_K, false>;
    case GgmlType::Q5_K:
      return gemv4_k4<BlockQ5_K, true>;
    case GgmlType::Q6_K:
      return gemv4_q6k;
    default: {
      const Gemv4Fn f = gemv4_fn_32(t);
      return f ? f : gemv4_fn_iq(t);
    }
  }
}

}  // namespace

bool gemv_supported(GgmlType t) {
  return gemv_pass(t) != nullptr;
}

int64_t gemv_max_tok(GgmlType t) {
  // Batched decode: up to 4 tokens, the 4-row K-quant passes beat the tile loop even though
  // each token redoes the unpacking (the 4 rows stay in L1). 1536x8960 from memory, 1 thread,
  // CPU time, two runs, tile -> GEMV: Q4_K 2 tokens 615/647 -> 550/387 us, 3 tokens 785/823
  // -> 778/561, 4 tokens 1021/1012 -> 975/701; 8 tokens 992/1014 (panel) -> 1830/1332. The
  // 1-row Q6_K pass lost at every count above 1 (2 tokens 530/569 -> 978/569). The Q5_0
  // 4-row pass (MoE expert down products): 2 tokens 1462/1104 -> 820/872 us, 3 tokens
  // 1693/1445 -> 1023/1181, 4 tokens 2467/2453 -> 1153/1678. Q4_0 was not measured. (All
  // measured before passes took their rows from 4 streams; Q6_K then had a 1-row pass.)
  // Q2_K/Q3_K (GEMV_COLD 1536x8960, tile -> pass, us, two runs): Q2_K 2 tokens 508/508 ->
  // 334/352, 3 tokens 778/713 -> 540/505, 4 tokens 963/910 -> 689/662; Q3_K 2 tokens
  // 641/656 -> 536/535, 3 tokens 809/794 -> 817/769, 4 tokens 1010/1007 -> 1119/1019.
  // I-quants and MXFP4 (matmul_gemv_iq.cpp): the passes against the batch kernels (int16 GEMM
  // for the grid types and IQ4_XS, 16-row panels from 8 rows for IQ4_NL/MXFP4). 1536 rows x
  // 2048, one thread, CPU time, us, GEMM / passes (IQ4_XS, IQ2_XXS, IQ1_S: their all-token
  // passes, which unpack once per block and 4 rows): IQ4_XS 8 tokens 307/262, 16 472/506, 48
  // 1152/1441; IQ2_XXS 8 447/318, 16 587/546, 48 1190/1335; IQ1_S 48 tokens 160/176 GOPS
  // (bench_kernels GEMM_MOE); IQ3_XXS 3 447/374, 4 450/553; IQ2_XS 3 508/364, 4 454/456; IQ1_M
  // 4 797/759, 8 1181/1514; IQ2_S 2 419/323, 3 396/478; IQ3_S 4 509/481, 8 570/942.
  // IQ4_NL/MXFP4 passes cost ~1.3 ns per block and row against the tile loop's ~2.
  switch (t) {
    case GgmlType::IQ1_S:
      return INT64_MAX;
    case GgmlType::IQ2_XXS:
      return 16;
    case GgmlType::IQ4_XS:
      return 12;
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4:
      return 7;
    case GgmlType::IQ3_S:
    case GgmlType::IQ1_M:
      return 4;
    case GgmlType::IQ2_XS:
    case GgmlType::IQ3_XXS:
      return 3;
    case GgmlType::IQ2_S:
      return 2;
    default:
      break;
  }
  if (t == GgmlType::Q3_K) return 2;
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q5_0 || t == GgmlType::Q2_K ? 4 : 1;
}

int64_t gemv_rows(const MatmulArgs& m) {
  const Gemv4Fn pass = gemv_pass(m.wtype);
  // Pass i takes row i of each quarter of the range: each quarter is read front to back,
  // so the thread keeps 4 sequential streams going. One stream per core read ~19 GB/s on the
  // Zen 5 test host, four ~32 (the probe in src/tools/machine_limits.cpp, docs/performance.md).
  const int64_t q = (m.row_end - m.row_begin) / kRows;
  // Tokens inside the row loop: the pass's rows stay in L1 while each token passes.
  const GemvTokensFn tokens = m.n_tok > 1 ? gemv_tokens_fn_iq(m.wtype) : nullptr;
  for (int64_t i = 0; i < q; ++i) {
    if (tokens) {
      tokens(m, m.row_begin + i, q);
      continue;
    }
    for (int64_t t = 0; t < m.n_tok; ++t) pass(m, t, m.row_begin + i, q);
  }
  return m.row_begin + kRows * q;
}

}  // namespace ds::avx512
