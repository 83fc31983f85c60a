// AVX-512 vec_dot and matmul. The tile loop unpacks each weight block once and multiplies
// it with NT activation rows (NT a template parameter, so the per-row accumulators live
// in registers). [BATCH_INVARIANT]: output (r, t) is always produced by the same sequence
// of accumulate() calls on its own accumulator followed by the same reduce(), whatever
// NT, n_tok or the row range are; vec_dot is the NT = 1 tile, so it equals matmul bitwise.
// Types without a fast path here fall back to the reference.
#include "kernels/avx512/intrinsics.h"

#include <algorithm>
#include <cstdint>

#include "kernels/avx512/dot_blocks.h"
#include "kernels/avx512/kernels_avx512.h"
#include "kernels/quant/repack.h"
#include "kernels/ref/ref.h"

namespace ds::avx512 {
namespace {

constexpr int kTileRows = 2;         // weight rows unpacked together when there are >= kTileToks tokens
constexpr int kTileToks = 4;         // activation rows multiplied with each unpacked block
constexpr int64_t kTokChunk = 64;    // activation rows kept hot in L2 while weight rows stream past
constexpr int64_t kPanelMinTok = 8;  // from this many activation rows on, quantized types use panels
// Activation rows per pass over a panel: unpacking a Q4_K panel costs about as much as 5
// activation rows of arithmetic (measured: 4096x4096, 1 row 586 us, 64 rows 5.8 ms), so
// long chunks amortize it; below kPanelMinTok rows the tile loop is faster.
constexpr int64_t kPanelChunk = kPanelMaxTok;

// Quantized weights: out[t * ld + r] = dot(weight row r, activation row t), r < NR, t < NT.
// Each activation block is loaded once for NR weight rows; each weight block is unpacked
// once for NT activation rows.
template <class Dq, int NR, int NT>
void tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* act, size_t act_stride, float* out, int64_t ld) {
  using WB = typename Dq::WBlock;
  using AB = typename Dq::ABlock;
  typename Dq::Acc acc[NR][NT];
  typename Dq::Unpacked u[NR];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = Dq::zero();
  int64_t ib = 0;
  if constexpr (requires { Dq::kGroup4; }) {
    // 32-blocks: four blocks per step so their integer sums are reduced together.
    typename Dq::Unpacked u4[NR][4];
    for (; ib + 4 <= n / Dq::kBlock; ib += 4) {
      for (int r = 0; r < NR; ++r)
        for (int b = 0; b < 4; ++b) Dq::unpack(reinterpret_cast<const WB*>(w + r * w_stride)[ib + b], u4[r][b]);
      for (int t = 0; t < NT; ++t) {
        const AB* a = reinterpret_cast<const AB*>(act + t * act_stride) + ib;
        for (int r = 0; r < NR; ++r) Dq::accumulate4(u4[r], a, acc[r][t]);
      }
    }
  }
  for (; ib < n / Dq::kBlock; ++ib) {
    for (int r = 0; r < NR; ++r) Dq::unpack(reinterpret_cast<const WB*>(w + r * w_stride)[ib], u[r]);
    for (int t = 0; t < NT; ++t) {
      const AB& a = reinterpret_cast<const AB*>(act + t * act_stride)[ib];
      for (int r = 0; r < NR; ++r) Dq::accumulate(u[r], a, acc[r][t]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) out[t * ld + r] = Dq::reduce(acc[r][t]);
}

// Float weights: 16 (F32, F16) or 32 (BF16) elements per step, a masked tail step.
struct DotF32 {
  using T = float;
  static constexpr int kStep = 16;
  using V = __m512;
  static V load(const T* p, __mmask32 m) { return _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), p); }
  static __m512 fma(V w, V a, __m512 acc) { return _mm512_fmadd_ps(w, a, acc); }
};
struct DotF16 {
  using T = uint16_t;
  static constexpr int kStep = 16;
  using V = __m512;
  static V load(const T* p, __mmask32 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>(m), p));
  }
  static __m512 fma(V w, V a, __m512 acc) { return _mm512_fmadd_ps(w, a, acc); }
};
// BF16 weights. CPUs with AVX512_BF16 (Zen 4, Sapphire Rapids and later) take two products
// per lane and instruction with vdpbf16ps. The instruction is written as inline assembly so
// that this file is compiled without -mavx512bf16: the Ice Lake and Cascade Lake Xeons that
// run this table without the extension widen both operands to float instead (exact: a bf16
// is the top half of a float) and use two FMAs, even and odd elements. The table picks one by CPUID (table.cpp).
struct DotBF16 {
  using T = uint16_t;
  static constexpr int kStep = 32;
  using V = __m512i;
  static V load(const T* p, __mmask32 m) { return _mm512_maskz_loadu_epi16(m, p); }
  static __m512 fma(V w, V a, __m512 acc) {
    asm("vdpbf16ps %[a], %[w], %[acc]" : [acc] "+v"(acc) : [w] "v"(w), [a] "v"(a));
    return acc;
  }
};
struct DotBF16Widened {
  using T = uint16_t;
  static constexpr int kStep = 32;
  struct V {
    __m512 even, odd;  // elements 2i and 2i+1 of the step as floats
  };
  static V load(const T* p, __mmask32 m) {
    const __m512i x = _mm512_maskz_loadu_epi16(m, p);
    return {_mm512_castsi512_ps(_mm512_slli_epi32(x, 16)),
            _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))))};
  }
  static __m512 fma(V w, V a, __m512 acc) {
    return _mm512_fmadd_ps(w.odd, a.odd, _mm512_fmadd_ps(w.even, a.even, acc));
  }
};

template <class F>
struct FloatTile {
  template <int NR, int NT>
  static void run(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* act, size_t act_stride, float* out,
                  int64_t ld) {
    using T = typename F::T;
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    auto step = [&](int64_t i, __mmask32 m) {
      typename F::V wv[NR];
      for (int r = 0; r < NR; ++r) wv[r] = F::load(reinterpret_cast<const T*>(w + r * w_stride) + i, m);
      for (int t = 0; t < NT; ++t) {
        const typename F::V av = F::load(reinterpret_cast<const T*>(act + t * act_stride) + i, m);
        for (int r = 0; r < NR; ++r) acc[r][t] = F::fma(wv[r], av, acc[r][t]);
      }
    };
    // Full steps with a constant mask (plain loads), then one masked tail step.
    int64_t i = 0;
    for (; i + F::kStep <= n; i += F::kStep) step(i, F::kStep == 32 ? 0xFFFFFFFFu : 0xFFFFu);
    if (i < n) step(i, static_cast<__mmask32>((1ull << (n - i)) - 1));
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) out[t * ld + r] = hsum512(acc[r][t]);
  }
};

template <class Dq>
struct QuantTile {
  template <int NR, int NT>
  static void run(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* act, size_t act_stride, float* out,
                  int64_t ld) {
    tile<Dq, NR, NT>(n, w, w_stride, act, act_stride, out, ld);
  }
};

// NR weight rows against activation rows [t0, t0 + nt): full tiles of kTileToks, then
// the remaining rows as one smaller tile.
template <class Tile, int NR>
void run_rows(const MatmulArgs& m, int64_t r, int64_t t0, int64_t nt) {
  const uint8_t* w = static_cast<const uint8_t*>(m.w) + r * m.w_row_stride;
  const uint8_t* act = static_cast<const uint8_t*>(m.act);
  int64_t t = t0;
  for (; t + kTileToks <= t0 + nt; t += kTileToks)
    Tile::template run<NR, kTileToks>(m.n_in, w, m.w_row_stride, act + t * m.act_row_stride, m.act_row_stride,
                                      m.out + t * m.out_stride + r, m.out_stride);
  const uint8_t* at = act + t * m.act_row_stride;
  float* o = m.out + t * m.out_stride + r;
  switch (t0 + nt - t) {
    case 3:
      Tile::template run<NR, 3>(m.n_in, w, m.w_row_stride, at, m.act_row_stride, o, m.out_stride);
      break;
    case 2:
      Tile::template run<NR, 2>(m.n_in, w, m.w_row_stride, at, m.act_row_stride, o, m.out_stride);
      break;
    case 1:
      Tile::template run<NR, 1>(m.n_in, w, m.w_row_stride, at, m.act_row_stride, o, m.out_stride);
      break;
    default:
      break;
  }
}

template <class Tile>
struct Kernel {
  static void matmul(const MatmulArgs& m) {
    for (int64_t t0 = 0; t0 < m.n_tok; t0 += kTokChunk) {
      const int64_t nt = std::min(kTokChunk, m.n_tok - t0);
      // Row pairs pay off only when each unpacked block meets many activation rows
      // (measured: 4096x4096 Q4_K, 64 tokens -7%; 1 token +35% with pairs). With 4-7 rows
      // (batched decode) pairs cost more than they save: 1536x8960 from memory, 4 rows,
      // CPU time, two runs: Q4_K 1790/1653 us with pairs, 1437/1380 without; Q6_K
      // 2591/2004 with, 1606/909 without.
      int64_t r = m.row_begin;
      if (nt >= kPanelMinTok)
        for (; r + kTileRows <= m.row_end; r += kTileRows) run_rows<Tile, kTileRows>(m, r, t0, nt);
      for (; r < m.row_end; ++r) run_rows<Tile, 1>(m, r, t0, nt);
    }
  }
  static float dot(int64_t n, const void* w, const void* a) {
    float out;
    Tile::template run<1, 1>(n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(a), 0, &out, 0);
    return out;
  }
};

using MatmulFn = void (*)(const MatmulArgs&);
using DotFn = float (*)(int64_t, const void*, const void*);

template <class Tile>
constexpr std::pair<MatmulFn, DotFn> fns() {
  return {&Kernel<Tile>::matmul, &Kernel<Tile>::dot};
}

// kBf16: the CPU has AVX512_BF16 (vdpbf16ps); without it BF16 weights are widened.
template <bool kBf16>
std::pair<MatmulFn, DotFn> fast_path(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return fns<FloatTile<DotF32>>();
    case GgmlType::F16:
      return fns<FloatTile<DotF16>>();
    case GgmlType::BF16:
      return kBf16 ? fns<FloatTile<DotBF16>>() : fns<FloatTile<DotBF16Widened>>();
    case GgmlType::Q4_0:
      return fns<QuantTile<DotQ4_0>>();
    case GgmlType::Q5_0:
      return fns<QuantTile<DotQ5_0>>();
    case GgmlType::Q8_0:
      return fns<QuantTile<DotQ8_0>>();
    case GgmlType::Q4_1:
      return fns<QuantTile<DotQ4_1>>();
    case GgmlType::Q5_1:
      return fns<QuantTile<DotQ5_1>>();
    case GgmlType::Q2_K:
      return fns<QuantTile<DotQ2K>>();
    case GgmlType::Q3_K:
      return fns<QuantTile<DotQ3K>>();
    case GgmlType::Q4_K:
      return fns<QuantTile<DotQ4K>>();
    case GgmlType::Q5_K:
      return fns<QuantTile<DotQ5K>>();
    case GgmlType::Q6_K:
      return fns<QuantTile<DotQ6K>>();
    case GgmlType::IQ1_S:
      return fns<QuantTile<DotIQ1_S>>();
    case GgmlType::IQ1_M:
      return fns<QuantTile<DotIQ1_M>>();
    case GgmlType::IQ2_XXS:
      return fns<QuantTile<DotIQ2_XXS>>();
    case GgmlType::IQ2_XS:
      return fns<QuantTile<DotIQ2_XS>>();
    case GgmlType::IQ2_S:
      return fns<QuantTile<DotIQ2_S>>();
    case GgmlType::IQ3_XXS:
      return fns<QuantTile<DotIQ3_XXS>>();
    case GgmlType::IQ3_S:
      return fns<QuantTile<DotIQ3_S>>();
    case GgmlType::IQ4_NL:
      return fns<QuantTile<DotIQ4_NL>>();
    case GgmlType::IQ4_XS:
      return fns<QuantTile<DotIQ4_XS>>();
    case GgmlType::MXFP4:
      return fns<QuantTile<DotMXFP4>>();
    default:
      return {nullptr, nullptr};
  }
}

template <bool kBf16>
float vec_dot_with(GgmlType wtype, int64_t n, const void* w, const void* act) {
  const DotFn dot = fast_path<kBf16>(wtype).second;
  return dot ? dot(n, w, act) : ref::vec_dot(wtype, n, w, act);
}

template <bool kBf16>
void matmul_with(const MatmulArgs& m) {
  const MatmulFn fn = fast_path<kBf16>(m.wtype).first;
  if (!fn) return ref::matmul(m);
  if (m.w_panels && repack_supported(m.wtype)) return packed_matmul(m);
  if (m.n_tok <= gemv_max_tok(m.wtype) && gemv_supported(m.wtype)) {
    // Decode: passes of 4 weight rows in matmul_gemv.cpp / matmul_gemv32.cpp,
    // the last rows by the tile loop; both bit-identical per output ([KQUANT_EXACT]).
    // Q4_K/Q5_K take this path up to 4 tokens (gemv_max_tok), the rest from 2 on the tiles.
    MatmulArgs rest = m;
    rest.row_begin = gemv_rows(m);
    if (rest.row_begin < rest.row_end) fn(rest);
    return;
  }
  if (const IqGemmFn gemm = m.n_tok >= 2 ? iq_gemm_fn(m.wtype) : nullptr) {
    // I-quant batches: row pairs with int16 scaled weights (matmul_iq_gemm.cpp), an odd
    // last row by the tile loop; both bit-identical per output ([IQUANT_ORDER]).
    MatmulArgs rest = m;
    rest.row_begin = gemm(m);
    if (rest.row_begin < rest.row_end) fn(rest);
    return;
  }
  // Panels gather the 16 rows with 32-bit offsets: 15 row strides must fit.
  const bool panel = panel_supported(m.wtype) && m.n_tok >= kPanelMinTok && m.w_row_stride <= INT32_MAX / 16;
  if (!panel) return fn(m);
  // Prefill: panels of 16 rows (matmul_panel.cpp), the remaining rows by the tile loop.
  // Both are bit-identical per output ([KQUANT_EXACT]), so the split keeps invariance.
  const int64_t panel_rows = (m.row_end - m.row_begin) / 16 * 16;
  for (int64_t t0 = 0; t0 < m.n_tok; t0 += kPanelChunk) {
    const int64_t nt = std::min(kPanelChunk, m.n_tok - t0);
    for (int64_t r = m.row_begin; r < m.row_begin + panel_rows;) r += panel_matmul(m, r, t0, nt);
  }
  MatmulArgs rest = m;
  rest.row_begin += panel_rows;
  if (rest.row_begin < rest.row_end) fn(rest);
}

}  // namespace

float vec_dot(GgmlType wtype, int64_t n, const void* w, const void* act) {
  return vec_dot_with<true>(wtype, n, w, act);
}
float vec_dot_without_bf16(GgmlType wtype, int64_t n, const void* w, const void* act) {
  return vec_dot_with<false>(wtype, n, w, act);
}
void matmul(const MatmulArgs& m) {
  matmul_with<true>(m);
}
void matmul_without_bf16(const MatmulArgs& m) {
  matmul_with<false>(m);
}

}  // namespace ds::avx512
