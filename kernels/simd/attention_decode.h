// The attention driver's decode path (kernels/simd/attention_driver.h): jobs whose members
// all sit at one position read K and V straight from the cache.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/kernels.h"
#include "kernels/simd/attention_core.h"

namespace ds::simd {

// A decode step's job is one query's heads over one KV head (GQA: 4-8 members; MLA: up to
// 16 heads over the shared latent). With so few members, converting each tile into scratch
// (load_tile) was 38-44% of the GQA kernel's time: each converted element was stored once
// and loaded back only by a few products. Here the loops convert K and V rows straight
// from the cache (f32, f16, bf16): GQA's K in the transposition its keys-in-lanes scores
// need (32 rows at a time), V in the accumulation. GQA accumulates all its members in one
// register pass, so each element is converted once per tile; MLA's 4.5x
// wider rows take passes of 4 heads, each converting the rows again (the conversion runs
// beside the FMAs, and the tile path's float tile did not fit L1 with 8-16 heads' queries
// and accumulators). The members' arithmetic is attend()'s exactly: the same tiles, the
// same score functions (GQA: scores_by_chunks; MLA: the same fma order per (member, row)
// and reduction tree), the same softmax, and acc * corr followed by one fma per row for the
// accumulators; converted values are the same floats. [BATCH_INVARIANT] therefore holds
// across the two paths.
//
// V must also provide kRegs (vector registers) and load_kv<type>(row, i) (elements [i, i +
// kWidth) of a row in the cache, as floats).

// Register blocking of NM members: tile rows per score block (NM * NR accumulators, NR K
// rows and a q register) and registers per member in the accumulation (NM * NC
// accumulators, NC V registers and a broadcast p), within V::kRegs less three.
template <class V, int NM>
constexpr int direct_rows() {
  for (int nr : {8, 4, 2})
    if (NM * nr + nr + 1 <= V::kRegs - 3) return nr;
  return 1;
}
template <class V, int NM>
constexpr int direct_regs() {
  for (int nc : {4, 2})
    if (NM * nc + nc + 1 <= V::kRegs - 3) return nc;
  return 1;
}
constexpr int kDirectMaxMembers = 16;  // MLA (passes of 4 members)
constexpr int kDirectMaxGqa = 8;       // GQA (one pass)

// Bytes per element of the cache types the direct path reads (F32, F16, BF16).
template <GgmlType KT>
constexpr size_t kv_elem_bytes = KT == GgmlType::F32 ? 4 : 2;

// dot_vectors over rows krow[0..NR) of type KT in the cache, from element off (n a whole
// number of vectors).
template <class V, GgmlType KT, int NM, int NR>
[[gnu::always_inline]] inline void direct_dot(const float* const* q, const uint8_t* const* krow, int off, int n,
                                              typename V::T* acc) {
  dot_vectors<V, NM, NR>(
      q, n, [&](int r, int i) { return V::template load_kv<KT>(krow[r], off + i); }, acc);
}

// Scores of NM members (queries qa[m], d_a floats, then qb[m], d_b floats) over rows
// krow[0..n_rows) of type KT: p[m][r] = (qa[m] . k_r[0..d_a) + qb[m] . k_r[d_a..]) * scale.
// Rows kpf[0..n_rows) are prefetched, NR per score block, when kpf is not null.
template <class V, GgmlType KT, int NM>
void direct_scores(const float* const* qa, const float* const* qb, const uint8_t* const* krow,
                   const uint8_t* const* kpf, int d_a, int d_b, float scale, int n_rows, float (*p)[kAttnTile]) {
  constexpr int W = V::kWidth, NR = direct_rows<V, NM>(), NA = NM * NR, NB = (NA + W - 1) / W;
  const size_t row_bytes = kv_elem_bytes<KT> * static_cast<size_t>(d_a + d_b);
  alignas(64) float s[W];
  for (int r0 = 0; r0 < n_rows; r0 += NR) {
    if (kpf)
      for (int r = 0; r < NR; ++r) prefetch_row(kpf[r0 + r], row_bytes);
    typename V::T acc[NA];
#pragma GCC unroll 32
    for (int k = 0; k < NA; ++k) acc[k] = V::zero();
    direct_dot<V, KT, NM, NR>(qa, krow + r0, 0, d_a, acc);
    if (d_b) direct_dot<V, KT, NM, NR>(qb, krow + r0, d_a, d_b, acc);
#pragma GCC unroll 2
    for (int b = 0; b < NB; ++b) {
      typename V::T blk[W];
#pragma GCC unroll 16
      for (int k = 0; k < W; ++k) blk[k] = b * W + k < NA ? acc[b * W + k] : V::zero();
      V::store(s, V::mul(V::reduce_block(blk), V::set1(scale)));
      static_assert(W % NR == 0, "a member's scores lie in one block");
      for (int m = b * W / NR; m < std::min(NM, (b + 1) * W / NR); ++m)
        std::memcpy(&p[m][r0], s + (m * NR - b * W), sizeof(float) * NR);
    }
  }
}

// acc[m][0..d) = acc[m] * corr[m] + sum_j p[m][j] * v_j for NM members over rows
// vrow[0..nt) of type KT; rows vpf[0..nt) are prefetched when vpf is not null. noinline,
// as accumulate_members.
template <class V, GgmlType KT, int NM>
[[gnu::noinline]] void direct_accumulate(float* const* acc, const float* corr, bool first, const float (*p)[kAttnTile],
                                         const uint8_t* const* vrow, const uint8_t* const* vpf, int nt, int d) {
  constexpr int W = V::kWidth, NC = direct_regs<V, NM>();
  const size_t pf_bytes = kv_elem_bytes<KT> * static_cast<size_t>(d);
  typename V::T vc[NM];
  for (int m = 0; m < NM; ++m) vc[m] = V::set1(corr[m]);
  for (int c0 = 0; c0 < d; c0 += NC * W) {
    typename V::T r[NM][NC];
    for (int m = 0; m < NM; ++m)
      for (int k = 0; k < NC; ++k) r[m][k] = rescaled<V>(acc[m] + c0 + W * k, vc[m], first);
    for (int j = 0; j < nt; ++j) {
      if (vpf && c0 == 0) prefetch_row(vpf[j], pf_bytes);  // one row per row of the first pass
      typename V::T v[NC];
      for (int k = 0; k < NC; ++k) v[k] = V::template load_kv<KT>(vrow[j], c0 + W * k);
      for (int m = 0; m < NM; ++m) {
        const typename V::T pj = V::set1(p[m][j]);
        for (int k = 0; k < NC; ++k) r[m][k] = V::fmadd(pj, v[k], r[m][k]);
      }
    }
    for (int m = 0; m < NM; ++m)
      for (int k = 0; k < NC; ++k) V::store(acc[m] + c0 + W * k, r[m][k]);
  }
}

// attend() for a job of members that share one n_kv, K and V rows of type KT (MLA: V is
// the first d_v of the K row), P members per register pass.
template <class V, GgmlType KT, int P>
void attend_direct(const AttnJob& job) {
  constexpr int W = V::kWidth, NMax = kDirectMaxMembers;
  const int n = job.n_m;
  const float* qa[NMax];
  const float* qb[NMax];
  float* acc[NMax];
  alignas(64) float acc_mem[NMax * kMaxRowWidth];
  alignas(64) float p[NMax][kAttnTile];
  alignas(64) float kt[kTileFloats];  // GQA: the tile's K rows transposed
  float* prow[NMax];
  float m_run[NMax], l_run[NMax], corr[NMax];
  for (int m = 0; m < n; ++m) {
    prow[m] = p[m];
    qa[m] = job.mem[m].qa;
    qb[m] = job.mem[m].qb;
    acc[m] = acc_mem + static_cast<size_t>(m) * job.d_v;
    m_run[m] = job.mem[m].sink;
    l_run[m] = sink_l0(job.mem[m].sink);
  }
  const int64_t n_kv = job.mem[0].n_kv;
  const int tile = tile_rows<V>(job.d_a + job.d_b, job.v ? job.d_v : 0);  // attend()'s tiles
  const int n_rows_mult = 8;                                              // every pass width's score rows divide 8
  const KvView& vv = job.v ? *job.v : *job.k;
  const size_t v_off = job.v ? job.v_off : job.k_off;
  const uint8_t* krow[kAttnTile];
  const uint8_t* vrow[kAttnTile];
  const uint8_t* kpf[kAttnTile];
  const uint8_t* vpf[kAttnTile];
  // The next tile's rows are prefetched row by row through the first pass's score and
  // accumulation loops (issued in one burst before the tile, they ran 1.5x slower from
  // memory). MLA's V rows are its K rows.
  KvRowWalk k_walk(*job.k, job.k_off, 0), v_walk(vv, v_off, 0);
  const int64_t pf_start = std::min<int64_t>(tile, n_kv - 1);
  KvRowWalk k_pf(*job.k, job.k_off, pf_start), v_pf(vv, v_off, pf_start);
  for (int64_t j0 = 0; j0 < n_kv; j0 += tile) {
    const int nt = static_cast<int>(std::min<int64_t>(tile, n_kv - j0));
    const int n_rows = (nt + n_rows_mult - 1) / n_rows_mult * n_rows_mult;
    next_rows(k_walk, nt, n_rows, krow);
    if (job.v) next_rows(v_walk, nt, nt, vrow);
    const int pf_n = static_cast<int>(std::clamp<int64_t>(n_kv - (j0 + tile), 0, nt));
    if (pf_n > 0) {
      next_rows(k_pf, pf_n, n_rows, kpf);
      if (job.v) next_rows(v_pf, pf_n, nt, vpf);
    }
    const uint8_t* const* kp = pf_n > 0 ? kpf : nullptr;
    const uint8_t* const* vp = pf_n > 0 && job.v ? vpf : nullptr;
    const uint8_t* const* vr = job.v ? vrow : krow;
    if (job.v) {  // GQA: attend()'s keys-in-lanes scores, K converted in the transposition
      scores_by_chunks<V>([&](int r, int d) { return V::template load_kv<KT>(krow[r], d); }, nt, job.d_a, qa, n,
                          job.scale, prow, kt, kp, pf_n, kv_elem_bytes<KT> * static_cast<size_t>(job.d_a));
    } else {
      member_passes<P>(n, [&]<int G>(int g) {
        direct_scores<V, KT, G>(qa + g, qb + g, krow, g == 0 ? kp : nullptr, job.d_a, job.d_b, job.scale, n_rows,
                                p + g);
      });
    }
    for (int m = 0; m < n; ++m) corr[m] = softmax_tile<V>(p[m], nt, m_run[m], l_run[m]);
    member_passes<P>(n, [&]<int G>(int g) {
      direct_accumulate<V, KT, G>(acc + g, corr + g, j0 == 0, p + g, vr, g == 0 ? vp : nullptr, nt, job.d_v);
    });
  }
  for (int m = 0; m < n; ++m) {
    const typename V::T inv = V::set1(1.0f / l_run[m]);
    for (int i = 0; i < job.d_v; i += W) V::store(job.mem[m].out + i, V::mul(V::load(acc[m] + i), inv));
  }
}

// GQA: all members in one register pass (at most 8); MLA: passes of 4 (its rows are 4.5x
// wider, and 8 members in one pass ran 1.2x slower than the tile path from cache).
template <class V, GgmlType KT, int... I>
bool attend_direct_members(const AttnJob& job, std::integer_sequence<int, I...>) {
  if (!job.v) {
    attend_direct<V, KT, 4>(job);
    return true;
  }
  return ((job.n_m == I + 1 ? (attend_direct<V, KT, I + 1>(job), true) : false) || ...);
}

// Runs the job through attend_direct when it qualifies: one n_kv for all members (one
// query), at most kDirectMaxGqa GQA or kDirectMaxMembers MLA members, K and V of one float
// type, widths in whole vectors and V rows in whole accumulation blocks. Returns false
// otherwise (Q8_0 caches, prefill jobs, wider GQA groups and bf16 pairs jobs take attend()).
template <class V>
bool try_attend_direct(const AttnJob& job) {
  if (job.pairs) return false;  // attend()'s pairs path serves decode too (attention_bf16.h)
  if (job.n_m > (job.v ? kDirectMaxGqa : kDirectMaxMembers) || (job.v && job.k->type != job.v->type)) return false;
  if (job.d_a % V::kWidth != 0 || job.d_b % V::kWidth != 0 || job.d_v % (4 * V::kWidth) != 0) return false;
  for (int i = 1; i < job.n_m; ++i)
    if (job.mem[i].n_kv != job.mem[0].n_kv) return false;
  using Gqa = std::make_integer_sequence<int, kDirectMaxGqa>;
  switch (job.k->type) {
    case GgmlType::F32:
      return attend_direct_members<V, GgmlType::F32>(job, Gqa{});
    case GgmlType::F16:
      return attend_direct_members<V, GgmlType::F16>(job, Gqa{});
    case GgmlType::BF16:
      return attend_direct_members<V, GgmlType::BF16>(job, Gqa{});
    default:
      return false;
  }
}

}  // namespace ds::simd
