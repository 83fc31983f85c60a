// AVX-512 matmul for the 256-element i-quants but IQ1_S (IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ4_XS; IQ1_S's all-token pass in matmul_gemv_iq.cpp is faster at every
// batch size) when more activation rows share the weights than the decode passes take
// (prefill, MoE experts; gemv_max_tok). Four weight rows at a time: each block is unpacked
// once (the tile loop's unpack, kernels/simd/iquant_blocks.inc) into int16 weights already
// multiplied by their integer sub-block scale (at most 62 * 31), then every activation row of the
// chunk meets it with VNNI dpwssd on the activation widened to int16: per 32 elements one
// instruction per row, and no separate scale multiply. An int32 lane of the sum holds 2
// elements (the same 2 of every sub-block); adding lane pairs gives the reference's 8
// lanes of 4 elements ([IQUANT_ORDER]), and the float steps are the tile loop's, so results
// are bit-identical to kernels/ref ([BATCH_INVARIANT] whichever path computes a row).
//
// (u8 x s8 dpbusd on the unscaled weights, then one int32 multiply per 16 lanes for the
// scale, costs 3 instructions per 32 elements and row instead of 1.)
#include "kernels/avx512/intrinsics.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/avx512/dot_blocks.h"
#include "kernels/avx512/kernels_avx512.h"

namespace ds::avx512 {
namespace {

constexpr int kToksG = 4;        // activation rows per step: 8-16 independent dpwssd chains
constexpr int64_t kChunkG = 64;  // activation rows whose accumulators live across the blocks

// Sub-block ib's 32 weights as int16 times their integer sub-scale (16-element halves may
// differ: IQ2_XS, IQ2_S, IQ1_M).
template <class Dq>
inline __m512i scaled16(const typename Dq::Unpacked& u, int ib, const __m256i* w8) {
  const __m512i sc = _mm512_cvtepu16_epi32(u.sc[ib]);  // dword i: the scale of elements 2i, 2i + 1
  return _mm512_mullo_epi16(_mm512_cvtepi8_epi16(w8[ib]), _mm512_or_si512(sc, _mm512_slli_epi32(sc, 16)));
}

// R = 2 or 4 weight rows per pass; rows 2q and 2q + 1 share the float lanes of pair q.
template <class Dq, int R>
struct GemmRows {
  static constexpr int kPairs = R / 2;
  static constexpr bool kIq1m = std::is_same_v<Dq, DotIQ1_M>;
  using WB = typename Dq::WBlock;
  struct Acc {                        // per activation row and pair q: [row 2q lanes 0..7 | row 2q + 1 lanes 0..7]
    __m512 v[kPairs], delta[kPairs];  // delta: IQ1_M's second chain
  };

  // The signed weights of a block (before the scale).
  static void signed_bytes(const typename Dq::Unpacked& u, __m256i* w8) {
    for (int ib = 0; ib < 8; ++ib) {
      if constexpr (requires { u.s; })
        w8[ib] = _mm256_sign_epi8(u.q[ib], u.s[ib]);
      else
        w8[ib] = u.q[ib];
    }
  }

  // Activation rows t .. t + NT - 1 of the chunk against the unpacked block of the R rows.
  template <int NT>
  [[gnu::always_inline]] static void step(const __m512i (*w)[8], const __m512i (*wd)[8], const __m512* dw,
                                          const BlockQ8_K* const* a, Acc* acc) {
    __m512i s[NT][R], sd[NT][R];
    for (int t = 0; t < NT; ++t)
      for (int r = 0; r < R; ++r) s[t][r] = sd[t][r] = _mm512_setzero_si512();
    for (int ib = 0; ib < 8; ++ib)
      for (int t = 0; t < NT; ++t) {
        const __m512i x =
            _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t]->qs + 32 * ib)));
        for (int r = 0; r < R; ++r) {
          s[t][r] = _mm512_dpwssd_epi32(s[t][r], w[r][ib], x);
          if constexpr (kIq1m) sd[t][r] = _mm512_dpwssd_epi32(sd[t][r], wd[r][ib], x);
        }
      }
    // lanes 2k, 2k + 1 -> lane k, row r in lanes 8r..8r+7
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int t = 0; t < NT; ++t)
      for (int q = 0; q < kPairs; ++q) {
        const __m512 dd = _mm512_mul_ps(dw[q], _mm512_set1_ps(a[t]->d));
        const __m512i l = _mm512_add_epi32(_mm512_permutex2var_epi32(s[t][2 * q], even, s[t][2 * q + 1]),
                                           _mm512_permutex2var_epi32(s[t][2 * q], odd, s[t][2 * q + 1]));
        acc[t].v[q] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(l), acc[t].v[q]);
        if constexpr (kIq1m) {
          const __m512i ld = _mm512_add_epi32(_mm512_permutex2var_epi32(sd[t][2 * q], even, sd[t][2 * q + 1]),
                                              _mm512_permutex2var_epi32(sd[t][2 * q], odd, sd[t][2 * q + 1]));
          acc[t].delta[q] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(ld), acc[t].delta[q]);
        }
      }
  }

  // Rows [r0, r0 + R) against activation rows [t0, t0 + nt), nt <= kChunkG.
  static void run(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt) {
    const auto* act = static_cast<const uint8_t*>(m.act);
    Acc acc[kChunkG];
    for (int64_t t = 0; t < nt; ++t) {
      for (int q = 0; q < kPairs; ++q) acc[t].v[q] = acc[t].delta[q] = _mm512_setzero_ps();
    }
    const WB* w[R];
    for (int r = 0; r < R; ++r)
      w[r] = reinterpret_cast<const WB*>(static_cast<const uint8_t*>(m.w) + (r0 + r) * m.w_row_stride);
    for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
      __m512i ws[R][8], wd[R][8];
      float d[R];
      for (int r = 0; r < R; ++r) {
        typename Dq::Unpacked u;
        Dq::unpack(w[r][ib], u);
        __m256i w8[8];
        signed_bytes(u, w8);
        for (int k = 0; k < 8; ++k) ws[r][k] = scaled16<Dq>(u, k, w8);
        if constexpr (kIq1m)
          for (int k = 0; k < 8; ++k) wd[r][k] = scaled16<Dq>(u, k, u.dl);
        d[r] = u.d;
      }
      __m512 dw[kPairs];
      for (int q = 0; q < kPairs; ++q)
        dw[q] = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(d[2 * q]), _mm512_set1_ps(d[2 * q + 1]));
      const BlockQ8_K* a[kToksG];
      int64_t t = 0;
      for (; t + kToksG <= nt; t += kToksG) {
        for (int k = 0; k < kToksG; ++k)
          a[k] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t + k) * m.act_row_stride) + ib;
        step<kToksG>(ws, wd, dw, a, acc + t);
      }
      for (; t < nt; ++t) {
        a[0] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t) * m.act_row_stride) + ib;
        step<1>(ws, wd, dw, a, acc + t);
      }
    }
    for (int64_t t = 0; t < nt; ++t)
      for (int r = 0; r < R; ++r) {
        const int q = r / 2;
        const __m256 v = r % 2 == 0 ? _mm512_castps512_ps256(acc[t].v[q]) : _mm512_extractf32x8_ps(acc[t].v[q], 1);
        typename Dq::Acc out;
        if constexpr (kIq1m) {
          out = {v, r % 2 == 0 ? _mm512_castps512_ps256(acc[t].delta[q]) : _mm512_extractf32x8_ps(acc[t].delta[q], 1)};
        } else {
          out = {v};
        }
        m.out[(t0 + t) * m.out_stride + r0 + r] = Dq::reduce(out);
      }
  }
};

// Rows in passes of 4 sharing each widened activation block (the weights of 4 rows come
// from L1), then a pass of 2; an odd last row is left to the caller.
template <class Dq>
int64_t gemm_rows(const MatmulArgs& m) {
  int64_t r = m.row_begin;
  for (; r + 4 <= m.row_end; r += 4)
    for (int64_t t0 = 0; t0 < m.n_tok; t0 += kChunkG) GemmRows<Dq, 4>::run(m, r, t0, std::min(kChunkG, m.n_tok - t0));
  if (r + 2 <= m.row_end) {
    for (int64_t t0 = 0; t0 < m.n_tok; t0 += kChunkG) GemmRows<Dq, 2>::run(m, r, t0, std::min(kChunkG, m.n_tok - t0));
    r += 2;
  }
  return r;
}

}  // namespace

IqGemmFn iq_gemm_fn(GgmlType t) {
  switch (t) {
    case GgmlType::IQ1_M:
      return gemm_rows<DotIQ1_M>;
    case GgmlType::IQ2_XXS:
      return gemm_rows<DotIQ2_XXS>;
    case GgmlType::IQ2_XS:
      return gemm_rows<DotIQ2_XS>;
    case GgmlType::IQ2_S:
      return gemm_rows<DotIQ2_S>;
    case GgmlType::IQ3_XXS:
      return gemm_rows<DotIQ3_XXS>;
    case GgmlType::IQ3_S:
      return gemm_rows<DotIQ3_S>;
    case GgmlType::IQ4_XS:
      return gemm_rows<DotIQ4_XS>;
    default:
      return nullptr;
  }
}

}  // namespace ds::avx512
