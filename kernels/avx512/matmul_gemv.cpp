// AVX-512 decode GEMV: one activation row against 4 weight rows per pass. The activation
// block is loaded (and put into the weights' storage order) once for the 4 rows, the 4
// rows' integer sums are reduced together by one transposing horizontal add, and the
// reference's float step (dall * sumi - dmin * summ, then the running sum) runs with one
// lane per row. Measured numbers are in tests/bench/RESULTS.md.
//
// [KQUANT_EXACT]: per (row, block) the integer sums are exact and the float operations
// are the reference's, in its order, so results are bit-identical to kernels/ref and to
// the tile loop in matmul.cpp (which keeps [BATCH_INVARIANT] when either path is chosen).
#include <immintrin.h>

#include <cstring>

#include "kernels/avx512/dot_blocks.h"
#include "kernels/avx512/kernels_avx512.h"

namespace ds::avx512 {
namespace {

constexpr int kRows = 4;  // weight rows per pass
// Software prefetch distance: each block step prefetches the 4 blocks' worth of bytes this
// far ahead in the (contiguous) rows. Measured on 48 cycled 1536x8960 Q4_K matrices (from
// DRAM), 1 thread: none 15.0 GB/s, 1 KB 17.0, 4 KB 21.9, 8 KB 26.0, 16 KB 20.1, 32 KB 22.4.
constexpr size_t kPrefetchBytes = 8192;

// The int32 lane sums of a[0..3] (16 lanes each) as one 4-lane vector: lane r = sum of a[r].
inline __m128i hsum4x16(const __m512i* a) {
  __m256i h[4];
  for (int r = 0; r < 4; ++r) h[r] = _mm256_add_epi32(_mm512_castsi512_si256(a[r]), _mm512_extracti64x4_epi64(a[r], 1));
  const __m256i x = _mm256_hadd_epi32(_mm256_hadd_epi32(h[0], h[1]), _mm256_hadd_epi32(h[2], h[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
}
// The same for 8-lane vectors.
inline __m128i hsum4x8(const __m256i* a) {
  const __m256i x = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
}

// Q4_K and Q5_K. In a row's 64 bytes qs[64h..64h+63] the low nibbles are elements
// [128h, 128h+32) ++ [128h+64, 128h+96) (sub-blocks 4h, 4h+2), the high nibbles
// [128h+32, 128h+64) ++ [128h+96, 128h+128) (sub-blocks 4h+1, 4h+3): the activation is
// permuted into that order once per block instead of every row's nibbles. Q5_K: the 5th
// bit of sub-block j's element l is bit j of qh[l].
template <class WB, bool kHasQh>
void gemv4_k4(const MatmulArgs& m, int64_t t, int64_t r0) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i idx_sc[4];  // register k: scales (4h, 4h+2) for the low nibbles, (4h+1, 4h+3) high
  for (int h = 0; h < 2; ++h) {
    idx_sc[2 * h] = idx_pair(4 * h, 4 * h + 2);
    idx_sc[2 * h + 1] = idx_pair(4 * h + 1, 4 * h + 3);
  }
  const __m256i idx_m = _mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
  const __m256i idx_dd = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  __m512i bit5[4];  // register k's qh bits: sub-blocks (4h, 4h+2) low nibbles, (4h+1, 4h+3) high
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 2; ++k)
      bit5[2 * h + k] = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(static_cast<char>(1 << (4 * h + k))),
                                               _mm512_set1_epi8(static_cast<char>(1 << (4 * h + k + 2))));
  __m128 acc = _mm_setzero_ps();
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    __m512i av[4];
    for (int h = 0; h < 2; ++h) {
      const __m512i x0 = _mm512_loadu_si512(ab.qs + 128 * h), x1 = _mm512_loadu_si512(ab.qs + 128 * h + 64);
      av[2 * h] = _mm512_shuffle_i64x2(x0, x1, 0x44);
      av[2 * h + 1] = _mm512_shuffle_i64x2(x0, x1, 0xEE);
    }
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));
    {
      const char* pf = reinterpret_cast<const char*>(w0) + kPrefetchBytes + ib * (kRows * sizeof(WB));
      for (size_t o = 0; o < kRows * sizeof(WB); o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
    }
    __m512i s[kRows];
    __m256i mn[kRows];
    uint32_t dd[kRows];
    for (int r = 0; r < kRows; ++r) {
      const auto& b = reinterpret_cast<const WB*>(w0 + r * m.w_row_stride)[ib];
      const __m512i sm = _mm512_castsi256_si512(k4_scales_mins(b.scales));
      __m512i acc_r = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i v = _mm512_loadu_si512(b.qs + 64 * h);
        __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (kHasQh) {  // the 5th bits, as in dot_blocks.h DotQ5K
          const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
          lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, bit5[2 * h]), lo, _mm512_set1_epi8(16));
          hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh, bit5[2 * h + 1]), hi, _mm512_set1_epi8(16));
        }
        acc_r = _mm512_dpwssd_epi32(acc_r, _mm512_maddubs_epi16(lo, av[2 * h]), _mm512_permutexvar_epi16(idx_sc[2 * h], sm));
        acc_r = _mm512_dpwssd_epi32(acc_r, _mm512_maddubs_epi16(hi, av[2 * h + 1]),
                                    _mm512_permutexvar_epi16(idx_sc[2 * h + 1], sm));
      }
      s[r] = acc_r;
      mn[r] = _mm256_madd_epi16(bsums, _mm256_permutexvar_epi16(idx_m, _mm512_castsi512_si256(sm)));
      std::memcpy(&dd[r], &b.d, 4);  // d, dmin: adjacent halves
    }
    const __m128i sumi = hsum4x16(s), summ = hsum4x8(mn);
    // [d0 dmin0 d1 dmin1 ...] -> [d0..d3 | dmin0..dmin3]
    const __m256 dm = _mm256_permutevar8x32_ps(
        _mm256_cvtph_ps(_mm_setr_epi32(static_cast<int>(dd[0]), static_cast<int>(dd[1]), static_cast<int>(dd[2]),
                                       static_cast<int>(dd[3]))),
        idx_dd);
    const __m128 ad = _mm_set1_ps(ab.d);
    const __m128 dall = _mm_mul_ps(ad, _mm256_castps256_ps128(dm)), dmin = _mm_mul_ps(ad, _mm256_extractf128_ps(dm, 1));
    acc = _mm_add_ps(acc, _mm_sub_ps(_mm_mul_ps(dall, _mm_cvtepi32_ps(sumi)), _mm_mul_ps(dmin, _mm_cvtepi32_ps(summ))));
  }
  _mm_storeu_ps(m.out + t * m.out_stride + r0, acc);
}

using Gemv4Fn = void (*)(const MatmulArgs&, int64_t, int64_t);

Gemv4Fn gemv4_fn(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K: return gemv4_k4<BlockQ4_K, false>;
    case GgmlType::Q5_K: return gemv4_k4<BlockQ5_K, true>;
    default: return nullptr;
  }
}

}  // namespace

bool gemv_supported(GgmlType t) { return gemv4_fn(t) != nullptr; }

int64_t gemv_rows(const MatmulArgs& m) {
  const Gemv4Fn fn = gemv4_fn(m.wtype);
  int64_t r = m.row_begin;
  // Tokens inside the row loop: the 4 rows stay in L1 while each token passes.
  for (; r + kRows <= m.row_end; r += kRows)
    for (int64_t t = 0; t < m.n_tok; ++t) fn(m, t, r);
  return r;
}

}  // namespace ds::avx512
