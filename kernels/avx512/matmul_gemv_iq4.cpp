// AVX-512 decode GEMV for the value-table i-quants and MXFP4 (IQ4_XS, IQ4_NL, MXFP4): one
// activation row against 4 weight rows per pass (rows rstep apart, one per stream:
// matmul_gemv.cpp), as matmul_gemv_iq.cpp does for the grid types.
//
// Products: VNNI dpbusd wants unsigned weights, so the 4-bit codes are looked up in the value
// table plus an offset (vpshufb) and the offset times the activation's lane sums (computed
// once per block for the 4 rows) is taken back.
//
// [IQUANT_ORDER] (kernels/simd/iquant_blocks.inc): IQ4_XS reduces each 256-block to the
// reference's 8 int32 lanes and steps its 8-lane float chain as the tile loop does; the
// 32-block types step one fma chain per row over the blocks in order. Results are
// bit-identical to kernels/ref and to the tile loop (tests/kernels/iquant_kernels_test.cpp,
// isa_vs_ref_test.cpp).
#include "kernels/avx512/intrinsics.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "kernels/avx512/dot_blocks.h"
#include "kernels/avx512/gemv_common.h"
#include "kernels/avx512/kernels_avx512.h"

namespace ds::avx512 {
namespace {

using namespace gemv;

// 16 bytes, each table value plus 128 (u8), repeated in the 4 lanes of a zmm.
inline __m512i offset_table(const int8_t* values) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(values));
  return _mm512_broadcast_i32x4(_mm_xor_si128(v, _mm_set1_epi8(static_cast<char>(0x80))));
}

// An 8-lane int32 result from the 16-lane partials of the low (lo) and high (hi) nibble
// halves of 4 sub-blocks: lane j = sum over the 4 chunks of lo's dword j, lane 4 + j of hi's.
inline __m256i lanes8(__m512i lo, __m512i hi) {
  const __m512i t = _mm512_add_epi32(_mm512_shuffle_i64x2(lo, hi, 0x44), _mm512_shuffle_i64x2(lo, hi, 0xEE));
  const __m512i u = _mm512_add_epi32(t, _mm512_shuffle_i64x2(t, t, 0xB1));
  return _mm512_castsi512_si256(_mm512_shuffle_i64x2(u, u, 0x08));
}

// IQ4_XS. A row's qs[64h..64h+63] is sub-blocks 4h..4h+3, 16 bytes each: 128-bit chunk c
// holds elements 0..15 (low nibbles) and 16..31 (high nibbles) of sub-block 4h + c. The
// activation is rearranged into the same order once per block (al: elements 0..15 of each
// sub-block, ah: 16..31).
void gemv4_iq4xs(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const __m512i tab = offset_table(kIq4nlValues), m4 = _mm512_set1_epi8(0x0F);
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i idx_sc[2] = {_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                             _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)};
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    __m512i al[2], ah[2], cl[2], ch[2];  // c*: -128 * lane sums, the dpbusd start
    for (int h = 0; h < 2; ++h) {
      const __m512i x0 = _mm512_loadu_si512(ab.qs + 128 * h), x1 = _mm512_loadu_si512(ab.qs + 128 * h + 64);
      al[h] = _mm512_shuffle_i64x2(x0, x1, 0x88);
      ah[h] = _mm512_shuffle_i64x2(x0, x1, 0xDD);
      cl[h] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, al[h]));
      ch[h] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, ah[h]));
    }
    for (int r = 0; r < kRows; ++r) {
      const BlockIQ4_XS& b = reinterpret_cast<const BlockIQ4_XS*>(w0 + r * ws)[ib];
      uint32_t sl;
      std::memcpy(&sl, b.scales_l, 4);
      // byte ib: low nibble from scales_l, bits 4-5 from scales_h
      const uint64_t sc8 = _pdep_u64(sl, 0x0F0F0F0F0F0F0F0Full) | _pdep_u64(b.scales_h, 0x0303030303030303ull) << 4;
      const __m512i sc32 =
          _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc8))), _mm512_set1_epi32(32));
      __m512i sl_sum = _mm512_setzero_si512(), sh_sum = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i q = _mm512_loadu_si512(b.qs + 64 * h);
        const __m512i ul = _mm512_shuffle_epi8(tab, _mm512_and_si512(q, m4));
        const __m512i uh = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
        const __m512i sc = _mm512_permutexvar_epi32(idx_sc[h], sc32);
        sl_sum = _mm512_add_epi32(sl_sum, _mm512_mullo_epi32(_mm512_dpbusd_epi32(cl[h], ul, al[h]), sc));
        sh_sum = _mm512_add_epi32(sh_sum, _mm512_mullo_epi32(_mm512_dpbusd_epi32(ch[h], uh, ah[h]), sc));
      }
      const float d = half_to_float(b.d) * ab.d;
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes8(sl_sum, sh_sum)), acc[r]);
    }
  }
  const __m128 res = _mm_setr_ps(hsum256(acc[0]), hsum256(acc[1]), hsum256(acc[2]), hsum256(acc[3]));
  store_rows4(m.out + t * m.out_stride + r0, rstep, res);
}

// IQ4_XS, all activation rows of a small batch in one pass: each row's block is unpacked
// once (values + 128, scale vectors) into a small buffer, then every token meets it with the
// single-token pass's operations (the same lanes and float steps per row and token).
void gemv4_iq4xs_chunk(const MatmulArgs& m, int64_t r0, int64_t rstep, int64_t t0, int64_t nt);

// Chunks of up to 64 activation rows (their blocks stay in L2 while the 4 rows pass).
void gemv4_iq4xs_tokens(const MatmulArgs& m, int64_t r0, int64_t rstep) {
  for (int64_t t0 = 0; t0 < m.n_tok; t0 += 64) gemv4_iq4xs_chunk(m, r0, rstep, t0, std::min<int64_t>(64, m.n_tok - t0));
}

void gemv4_iq4xs_chunk(const MatmulArgs& m, int64_t r0, int64_t rstep, int64_t t0, int64_t nt) {
  constexpr int kMaxTok = 64;
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const auto* act = static_cast<const uint8_t*>(m.act) + t0 * m.act_row_stride;
  const __m512i tab = offset_table(kIq4nlValues), m4 = _mm512_set1_epi8(0x0F);
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i idx_sc[2] = {_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                             _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)};
  __m256 acc[kMaxTok][kRows];
  for (int64_t t = 0; t < nt; ++t)
    for (int r = 0; r < kRows; ++r) acc[t][r] = _mm256_setzero_ps();
  struct Row {
    __m512i ul[2], uh[2], sc[2];
    float d;
  } rows[kRows];
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    for (int r = 0; r < kRows; ++r) {
      const BlockIQ4_XS& b = reinterpret_cast<const BlockIQ4_XS*>(w0 + r * ws)[ib];
      uint32_t sl;
      std::memcpy(&sl, b.scales_l, 4);
      const uint64_t sc8 = _pdep_u64(sl, 0x0F0F0F0F0F0F0F0Full) | _pdep_u64(b.scales_h, 0x0303030303030303ull) << 4;
      const __m512i sc32 =
          _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc8))), _mm512_set1_epi32(32));
      for (int h = 0; h < 2; ++h) {
        const __m512i q = _mm512_loadu_si512(b.qs + 64 * h);
        rows[r].ul[h] = _mm512_shuffle_epi8(tab, _mm512_and_si512(q, m4));
        rows[r].uh[h] = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
        rows[r].sc[h] = _mm512_permutexvar_epi32(idx_sc[h], sc32);
      }
      rows[r].d = half_to_float(b.d);
    }
    for (int64_t t = 0; t < nt; ++t) {
      const BlockQ8_K& ab = reinterpret_cast<const BlockQ8_K*>(act + t * m.act_row_stride)[ib];
      __m512i al[2], ah[2], cl[2], ch[2];
      for (int h = 0; h < 2; ++h) {
        const __m512i x0 = _mm512_loadu_si512(ab.qs + 128 * h), x1 = _mm512_loadu_si512(ab.qs + 128 * h + 64);
        al[h] = _mm512_shuffle_i64x2(x0, x1, 0x88);
        ah[h] = _mm512_shuffle_i64x2(x0, x1, 0xDD);
        cl[h] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, al[h]));
        ch[h] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, ah[h]));
      }
      for (int r = 0; r < kRows; ++r) {
        __m512i sl_sum = _mm512_setzero_si512(), sh_sum = _mm512_setzero_si512();
        for (int h = 0; h < 2; ++h) {
          sl_sum = _mm512_add_epi32(
              sl_sum, _mm512_mullo_epi32(_mm512_dpbusd_epi32(cl[h], rows[r].ul[h], al[h]), rows[r].sc[h]));
          sh_sum = _mm512_add_epi32(
              sh_sum, _mm512_mullo_epi32(_mm512_dpbusd_epi32(ch[h], rows[r].uh[h], ah[h]), rows[r].sc[h]));
        }
        const float d = rows[r].d * ab.d;
        acc[t][r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes8(sl_sum, sh_sum)), acc[t][r]);
      }
    }
  }
  for (int64_t t = 0; t < nt; ++t)
    store_rows4(m.out + (t0 + t) * m.out_stride + r0, rstep,
                _mm_setr_ps(hsum256(acc[t][0]), hsum256(acc[t][1]), hsum256(acc[t][2]), hsum256(acc[t][3])));
}

// IQ4_NL (18 bytes: d, qs[16]) and MXFP4 (17 bytes: e, qs[16]) against Q8_0: 4 blocks per
// step, one 128-bit chunk per block (low nibbles = elements 0..15, high = 16..31, the Q8_0
// activation split the same way), as matmul_gemv32.cpp does for Q4_0. Values plus 128
// through vpshufb, minus 128 times the activation block sums; one transposing tree gives
// chunk b = [row 0..3 of block b], and each row's fma chain takes the blocks in order.
template <bool kMx>
void gemv4_nl32(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  using WB = std::conditional_t<kMx, BlockMxfp4, BlockIQ4_NL>;
  constexpr int kHead = kMx ? 1 : 2;  // bytes before qs
  using Dot = std::conditional_t<kMx, DotMXFP4, DotIQ4_NL>;
  const uint8_t* act = static_cast<const uint8_t*>(m.act) + t * m.act_row_stride;
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const int64_t nb = m.n_in / 32, n_steps = nb / 4;
  const __m512i tab = offset_table(kMx ? kMxfp4Values : kIq4nlValues), m4 = _mm512_set1_epi8(0x0F);
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  // bytes / words r * 4 + b -> lane 4 b + r
  const __m128i tr8 = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m128i tr16a = _mm_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
  __m128 acc = _mm_setzero_ps();
  for (int64_t is = 0; is < n_steps; ++is) {
    const uint8_t* ab = act + is * 4 * sizeof(BlockQ8_0);
    const __m512i alo = load4x16(ab + 2, sizeof(BlockQ8_0)), ahi = load4x16(ab + 18, sizeof(BlockQ8_0));
    const __m512i corr =
        chunk_sums(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, alo), k128, ahi));
    const __m128 da = _mm_cvtph_ps(
        _mm_setr_epi16(static_cast<short>(iq_load16(ab)), static_cast<short>(iq_load16(ab + 34)),
                       static_cast<short>(iq_load16(ab + 68)), static_cast<short>(iq_load16(ab + 102)), 0, 0, 0, 0));
    const uint8_t* wb = w0 + is * 4 * sizeof(WB);
    __m512i z[kRows];
    alignas(16) uint32_t head[kRows * 2];  // MXFP4: e of 4 blocks per row; IQ4_NL: d of 4 blocks per row (2 words)
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* p = wb + r * ws;
      const __m512i q = load4x16(p + kHead, sizeof(WB));
      const __m512i ul = _mm512_shuffle_epi8(tab, _mm512_and_si512(q, m4));
      const __m512i uh = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
      z[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ul, alo), uh, ahi);
      if constexpr (kMx) {
        head[r] = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[17]) << 8 | static_cast<uint32_t>(p[34]) << 16 |
                  static_cast<uint32_t>(p[51]) << 24;
      } else {
        head[2 * r] = static_cast<uint32_t>(iq_load16(p)) | static_cast<uint32_t>(iq_load16(p + 18)) << 16;
        head[2 * r + 1] = static_cast<uint32_t>(iq_load16(p + 36)) | static_cast<uint32_t>(iq_load16(p + 54)) << 16;
      }
    }
    const __m512i sumi = _mm512_sub_epi32(transpose_add4(z), corr);
    __m512 dw;  // lane 4 b + r: row r's scale of block b
    if constexpr (kMx) {
      const __m512i e =
          _mm512_cvtepu8_epi32(_mm_shuffle_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(head)), tr8));
      const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
      const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
      dw = _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), normal, sub));
    } else {
      // words r * 4 + b -> b * 4 + r: within each 128-bit half, then across
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(head));  // rows 0,1 | rows 2,3
      const __m256i x =
          _mm256_shuffle_epi8(h, _mm256_broadcastsi128_si256(tr16a));  // per half: b0r0 b0r1 b1r0 b1r1 ...
      const __m256i y = _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      dw = _mm512_cvtph_ps(y);
    }
    const __m512 dd =
        _mm512_mul_ps(dw, _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                                _mm512_castps128_ps512(da)));
    const __m512 v = _mm512_cvtepi32_ps(sumi);
    acc = _mm_fmadd_ps(_mm512_castps512_ps128(v), _mm512_castps512_ps128(dd), acc);
    acc = _mm_fmadd_ps(_mm512_extractf32x4_ps(v, 1), _mm512_extractf32x4_ps(dd, 1), acc);
    acc = _mm_fmadd_ps(_mm512_extractf32x4_ps(v, 2), _mm512_extractf32x4_ps(dd, 2), acc);
    acc = _mm_fmadd_ps(_mm512_extractf32x4_ps(v, 3), _mm512_extractf32x4_ps(dd, 3), acc);
  }
  alignas(16) float out[kRows];
  _mm_store_ps(out, acc);
  if (n_steps * 4 < nb) {  // the last blocks, one at a time (the tile loop's step)
    const auto* a = reinterpret_cast<const BlockQ8_0*>(act);
    for (int r = 0; r < kRows; ++r) {
      const auto* b = reinterpret_cast<const WB*>(w0 + r * ws);
      typename Dot::Acc sum{out[r]};
      for (int64_t ib = n_steps * 4; ib < nb; ++ib) {
        typename Dot::Unpacked u;
        Dot::unpack(b[ib], u);
        Dot::accumulate(u, a[ib], sum);
      }
      out[r] = sum.sum;
    }
  }
  store_rows4(m.out + t * m.out_stride + r0, rstep, _mm_load_ps(out));
}

}  // namespace

GemvTokensFn gemv_tokens_fn_iq4(GgmlType t) {
  return t == GgmlType::IQ4_XS ? gemv4_iq4xs_tokens : nullptr;
}

Gemv4Fn gemv4_fn_iq4(GgmlType t) {
  switch (t) {
    case GgmlType::IQ4_XS:
      return gemv4_iq4xs;
    case GgmlType::IQ4_NL:
      return gemv4_nl32<false>;
    case GgmlType::MXFP4:
      return gemv4_nl32<true>;
    default:
      return nullptr;
  }
}

}  // namespace ds::avx512
