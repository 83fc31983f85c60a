// AVX-512 matmul over weights repacked into 16-row panels at load (kernels/quant/repack.h,
// docs/repack.md): the K-quant panels of panel_kquant.h loaded with plain 64-byte loads
// instead of row loads, transposes and gathers.
//
// 2 to kLockstepMaxTok activation rows (batched decode) run 4 panels in lockstep, block by
// block, one from each quarter of the range (4 sequential streams per thread, as the row
// GEMV in matmul_gemv.cpp), with a software prefetch ahead. More rows go to the panel
// kernels of matmul_panel.cpp, which read the packed form through MatmulArgs::w_panels.
// One row (single-sequence decode) stays on the row GEMV over the original rows.
//
// [KQUANT_EXACT]: the per-(row, token, block) integer sums and float steps are those of
// the unpacked panels, so results are bit-identical to kernels/ref whichever path, token
// count or row range computes them ([BATCH_INVARIANT]).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/avx512/kernels_avx512.h"
#include "kernels/avx512/panel_kquant.h"
#include "kernels/quant/repack.h"

namespace ds::avx512 {
namespace {

constexpr int64_t kLockstepMaxTok = 8;
constexpr int kStreams = 4;

template <class WB, bool kHasQh>
struct KindK4 {
  using Panel = PanelK4;
  static constexpr size_t kBlockBytes = sizeof(WB);
  static void unpack(const uint8_t* blk, Panel& p) { unpack_k4_packed<WB, kHasQh>(blk, p); }
  template <int NT>
  static void accumulate(const Panel& p, const BlockQ8_K* const* a, __m512* acc) { accumulate_k4<NT>(p, a, acc); }
};

struct KindQ6K {
  using Panel = PanelQ6K;
  static constexpr size_t kBlockBytes = sizeof(BlockQ6_K);
  static void unpack(const uint8_t* blk, Panel& p) { unpack_q6k_packed(blk, p); }
  template <int NT>
  static void accumulate(const Panel& p, const BlockQ8_K* const* a, __m512* acc) { accumulate_q6k<NT>(p, a, acc); }
};

// Panels at rows[0..n) (multiples of 16) x activation rows [0, nt), nt <= kLockstepMaxTok.
template <class Kind>
void lockstep(const MatmulArgs& m, const int64_t* rows, int n, int64_t nt) {
  __m512 acc[kStreams][kLockstepMaxTok];
  for (int i = 0; i < n; ++i)
    for (int64_t t = 0; t < nt; ++t) acc[i][t] = _mm512_setzero_ps();
  const uint8_t* pk[kStreams];
  for (int i = 0; i < n; ++i) pk[i] = packed_panel(m, rows[i]);
  const auto* act = static_cast<const uint8_t*>(m.act);
  typename Kind::Panel p;
  const BlockQ8_K* a[kLockstepMaxTok];
  const int64_t nb = m.n_in / kQK_K;
  for (int64_t ib = 0; ib < nb; ++ib) {
    for (int64_t t = 0; t < nt; ++t) a[t] = reinterpret_cast<const BlockQ8_K*>(act + t * m.act_row_stride) + ib;
    for (int i = 0; i < n; ++i) {
      const uint8_t* blk = pk[i] + static_cast<size_t>(ib) * kPanelRows * Kind::kBlockBytes;
      // Two blocks ahead: without it the packed stream read 12.7 GB/s on one thread, with
      // it 18.7 (bench_kernels GEMV_COLD_PACKED Q4_K, 1 token); 1 or 4 blocks ahead the same.
      const char* pf = reinterpret_cast<const char*>(blk) + 2 * kPanelRows * Kind::kBlockBytes;
      for (size_t o = 0; o < kPanelRows * Kind::kBlockBytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
      Kind::unpack(blk, p);
      int64_t t = 0;
      if (nt == 8) {
        Kind::template accumulate<8>(p, a, acc[i]);
        continue;
      }
      if (t + 4 <= nt) {
        Kind::template accumulate<4>(p, a, acc[i]);
        t = 4;
      }
      for (; t < nt; ++t) Kind::template accumulate<1>(p, a + t, acc[i] + t);
    }
  }
  for (int i = 0; i < n; ++i)
    for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(m.out + t * m.out_stride + rows[i], acc[i][t]);
}

// Panels [pb, pe) (rows, multiples of 16): panel i of each quarter together.
template <class Kind>
void lockstep_range(const MatmulArgs& m, int64_t pb, int64_t pe) {
  const int64_t n_panels = (pe - pb) / kPanelRows, q = n_panels / kStreams;
  int64_t rows[kStreams];
  for (int64_t i = 0; i < q; ++i) {
    for (int k = 0; k < kStreams; ++k) rows[k] = pb + kPanelRows * (k * q + i);
    lockstep<Kind>(m, rows, kStreams, m.n_tok);
  }
  const int rest = static_cast<int>(n_panels - kStreams * q);
  for (int k = 0; k < rest; ++k) rows[k] = pb + kPanelRows * (kStreams * q + k);
  if (rest > 0) lockstep<Kind>(m, rows, rest, m.n_tok);
}

void lockstep_dispatch(const MatmulArgs& m, int64_t pb, int64_t pe) {
  switch (m.wtype) {
    case GgmlType::Q4_K: return lockstep_range<KindK4<BlockQ4_K, false>>(m, pb, pe);
    case GgmlType::Q5_K: return lockstep_range<KindK4<BlockQ5_K, true>>(m, pb, pe);
    case GgmlType::Q6_K: return lockstep_range<KindQ6K>(m, pb, pe);
    default: return;
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
  // One activation row: the row GEMV (matmul_gemv.cpp) on the original rows is faster
  // (1536x8960 Q4_K, one thread: 178 us warm / 242 us from memory, against 266-320 / 384-
  // 413 us for the packed panels), so decode keeps reading them.
  if (m.n_tok < 2) return matmul(plain);
  if (pb > m.row_begin) {
    plain.row_begin = m.row_begin;
    plain.row_end = std::min(pb, m.row_end);
    matmul(plain);
  }
  if (pe > m.row_end || pb >= pe) return;
  if (pe < m.row_end) {
    plain.row_begin = pe;
    plain.row_end = m.row_end;
    matmul(plain);
  }
  if (m.n_tok <= kLockstepMaxTok) return lockstep_dispatch(m, pb, pe);
  MatmulArgs mid = m;
  mid.row_begin = pb;
  mid.row_end = pe;
  for (int64_t t0 = 0; t0 < m.n_tok; t0 += kPanelMaxTok) {
    const int64_t nt = std::min(kPanelMaxTok, m.n_tok - t0);
    for (int64_t r = pb; r < pe;) r += panel_matmul(mid, r, t0, nt);
  }
}

}  // namespace ds::avx512
