// AVX-512 vec_dot and matmul. The tile loop unpacks each weight block once and multiplies
// it with NT activation rows (NT a template parameter, so the per-row accumulators live
// in registers). [BATCH_INVARIANT]: output (r, t) is always produced by the same sequence
// of accumulate() calls on its own accumulator followed by the same reduce(), whatever
// NT, n_tok or the row range are; vec_dot is the NT = 1 tile, so it equals matmul bitwise.
// Types without a fast path here fall back to the reference.
#include <immintrin.h>

#include <algorithm>

#include "kernels/avx512/dot_blocks.h"
#include "kernels/avx512/kernels_avx512.h"
#include "kernels/ref/ref.h"

namespace ds::avx512 {
namespace {

constexpr int kMaxTile = 4;      // activation rows per unpacked weight block
constexpr int64_t kTokChunk = 64;  // activation rows kept hot in L2 while rows stream past

// out[t] = dot(weight row w, activation row act + t * act_stride), t < NT.
template <class Dq, int NT>
void tile(int64_t nb, const typename Dq::WBlock* w, const uint8_t* act, size_t act_stride, float* out,
          int64_t out_stride) {
  typename Dq::Acc acc[NT];
  const typename Dq::ABlock* a[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = Dq::zero();
    a[t] = reinterpret_cast<const typename Dq::ABlock*>(act + static_cast<size_t>(t) * act_stride);
  }
  typename Dq::Unpacked u;
  for (int64_t ib = 0; ib < nb; ++ib) {
    Dq::unpack(w[ib], u);
    for (int t = 0; t < NT; ++t) Dq::accumulate(u, a[t][ib], acc[t]);
  }
  for (int t = 0; t < NT; ++t) out[t * out_stride] = Dq::reduce(acc[t]);
}

// Float weights: 16 (F32, F16) or 32 (BF16) elements per step, a masked tail step.
struct DotF32 {
  using T = float;
  static constexpr int kStep = 16;
  using V = __m512;
  static V load_w(const T* p, __mmask32 m) { return _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), p); }
  static V load_a(const T* p, __mmask32 m) { return load_w(p, m); }
  static __m512 fma(V w, V a, __m512 acc) { return _mm512_fmadd_ps(w, a, acc); }
};
struct DotF16 {
  using T = uint16_t;
  static constexpr int kStep = 16;
  using V = __m512;
  static V load_w(const T* p, __mmask32 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>(m), p));
  }
  static V load_a(const T* p, __mmask32 m) { return load_w(p, m); }
  static __m512 fma(V w, V a, __m512 acc) { return _mm512_fmadd_ps(w, a, acc); }
};
struct DotBF16 {
  using T = uint16_t;
  static constexpr int kStep = 32;
  using V = __m512bh;
  static V load_w(const T* p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }
  static V load_a(const T* p, __mmask32 m) { return load_w(p, m); }
  static __m512 fma(V w, V a, __m512 acc) { return _mm512_dpbf16_ps(acc, w, a); }
};

template <class F, int NT>
void tile_float(int64_t n, const typename F::T* w, const uint8_t* act, size_t act_stride, float* out,
                int64_t out_stride) {
  __m512 acc[NT];
  const typename F::T* a[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm512_setzero_ps();
    a[t] = reinterpret_cast<const typename F::T*>(act + static_cast<size_t>(t) * act_stride);
  }
  const __mmask32 full = F::kStep == 32 ? 0xFFFFFFFFu : 0xFFFFu;
  for (int64_t i = 0; i < n; i += F::kStep) {
    const int64_t left = n - i;
    const __mmask32 m = left >= F::kStep ? full : static_cast<__mmask32>((1ull << left) - 1);
    const typename F::V wv = F::load_w(w + i, m);
    for (int t = 0; t < NT; ++t) acc[t] = F::fma(wv, F::load_a(a[t] + i, m), acc[t]);
  }
  for (int t = 0; t < NT; ++t) out[t * out_stride] = hsum512(acc[t]);
}

// One weight row against activation rows [0, n_tok), NT rows at a time then the tail.
template <class Dq>
struct Quant {
  static void row(const MatmulArgs& m, int64_t r, int64_t t0, int64_t nt) {
    const auto* w = reinterpret_cast<const typename Dq::WBlock*>(static_cast<const uint8_t*>(m.w) + r * m.w_row_stride);
    const int64_t nb = m.n_in / Dq::kBlock;
    const uint8_t* act = static_cast<const uint8_t*>(m.act);
    int64_t t = t0;
    for (; t + kMaxTile <= t0 + nt; t += kMaxTile)
      tile<Dq, kMaxTile>(nb, w, act + t * m.act_row_stride, m.act_row_stride, m.out + t * m.out_stride + r, m.out_stride);
    float* o = m.out + t * m.out_stride + r;
    const uint8_t* at = act + t * m.act_row_stride;
    switch (t0 + nt - t) {
      case 3: tile<Dq, 3>(nb, w, at, m.act_row_stride, o, m.out_stride); break;
      case 2: tile<Dq, 2>(nb, w, at, m.act_row_stride, o, m.out_stride); break;
      case 1: tile<Dq, 1>(nb, w, at, m.act_row_stride, o, m.out_stride); break;
      default: break;
    }
  }
  static float dot(int64_t n, const void* w, const void* a) {
    float out;
    tile<Dq, 1>(n / Dq::kBlock, static_cast<const typename Dq::WBlock*>(w), static_cast<const uint8_t*>(a), 0, &out, 0);
    return out;
  }
};

template <class F>
struct Float {
  static void row(const MatmulArgs& m, int64_t r, int64_t t0, int64_t nt) {
    const auto* w = reinterpret_cast<const typename F::T*>(static_cast<const uint8_t*>(m.w) + r * m.w_row_stride);
    const uint8_t* act = static_cast<const uint8_t*>(m.act);
    int64_t t = t0;
    for (; t + kMaxTile <= t0 + nt; t += kMaxTile)
      tile_float<F, kMaxTile>(m.n_in, w, act + t * m.act_row_stride, m.act_row_stride, m.out + t * m.out_stride + r, m.out_stride);
    float* o = m.out + t * m.out_stride + r;
    const uint8_t* at = act + t * m.act_row_stride;
    switch (t0 + nt - t) {
      case 3: tile_float<F, 3>(m.n_in, w, at, m.act_row_stride, o, m.out_stride); break;
      case 2: tile_float<F, 2>(m.n_in, w, at, m.act_row_stride, o, m.out_stride); break;
      case 1: tile_float<F, 1>(m.n_in, w, at, m.act_row_stride, o, m.out_stride); break;
      default: break;
    }
  }
  static float dot(int64_t n, const void* w, const void* a) {
    float out;
    tile_float<F, 1>(n, static_cast<const typename F::T*>(w), static_cast<const uint8_t*>(a), 0, &out, 0);
    return out;
  }
};

using RowFn = void (*)(const MatmulArgs&, int64_t, int64_t, int64_t);
using DotFn = float (*)(int64_t, const void*, const void*);

template <class K>
constexpr std::pair<RowFn, DotFn> fns() {
  return {&K::row, &K::dot};
}

std::pair<RowFn, DotFn> fast_path(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return fns<Float<DotF32>>();
    case GgmlType::F16: return fns<Float<DotF16>>();
    case GgmlType::BF16: return fns<Float<DotBF16>>();
    case GgmlType::Q4_0: return fns<Quant<DotQ4_0>>();
    case GgmlType::Q5_0: return fns<Quant<DotQ5_0>>();
    case GgmlType::Q8_0: return fns<Quant<DotQ8_0>>();
    case GgmlType::Q4_K: return fns<Quant<DotQ4K>>();
    case GgmlType::Q5_K: return fns<Quant<DotQ5K>>();
    case GgmlType::Q6_K: return fns<Quant<DotQ6K>>();
    default: return {nullptr, nullptr};
  }
}

}  // namespace

float vec_dot(GgmlType wtype, int64_t n, const void* w, const void* act) {
  const DotFn dot = fast_path(wtype).second;
  return dot ? dot(n, w, act) : ref::vec_dot(wtype, n, w, act);
}

void matmul(const MatmulArgs& m) {
  const RowFn row = fast_path(m.wtype).first;
  if (!row) return ref::matmul(m);
  // Token chunks stay in L2 while the weight rows of [row_begin, row_end) stream past.
  for (int64_t t0 = 0; t0 < m.n_tok; t0 += kTokChunk) {
    const int64_t nt = std::min(kTokChunk, m.n_tok - t0);
    for (int64_t r = m.row_begin; r < m.row_end; ++r) row(m, r, t0, nt);
  }
}

}  // namespace ds::avx512
