// GQA and MLA attention over a BF16 cache with bf16 dot products (V::kBf16Dot: AVX-512
// with AVX512_BF16), the pieces attend() uses for jobs with AttnJob::pairs set. MLA is the
// case K row = [c | k_pe], q = [q_abs | q_pe], V = the first kv_lora elements of the row.
//
// Numerics: those of the reference for a bf16 cache (SPEC.md: BF16 operands take BF16
// activations). q is rounded to bf16 (nearest even) once per job; each score is one lane's
// chain of dot products over pairs of elements (q[2i], q[2i + 1]) . (k[2i], k[2i + 1]),
// the products exact and the sums in f32. The softmax runs in f32 as in attend(); its
// weights p (relative to the running maximum) are rounded to bf16 for the V products,
// which pair rows (2i, 2i + 1) of a tile: acc[c] += p[2i] v[2i][c] + p[2i + 1] v[2i + 1][c].
// The denominator sums the unrounded weights. Against attention in exact arithmetic over
// the bf16-rounded q the output moves by at most 2^-8 of the largest |v| (each weight's
// rounding, 8-bit significands) plus f32 rounding; tests/kernels/attention_test.cpp
// reproduces the weights' rounding tile by tile and allows only f32 rounding on top.
//
// One instruction does 32 multiply-adds instead of an FMA's 16; K needs no conversion (its
// rows are transposed as pairs, 32-bit elements), V rows are interleaved in pairs once per
// tile. Decode jobs take the same tile path (try_attend_direct declines them), so a
// query's output is bit-identical in prefill and decode ([BATCH_INVARIANT]): the same
// tiles, the same pairs (rows 2i and 2i + 1 of a tile; tiles start at multiples of the
// tile size, an even number), and a pair past a member's last row contributes +0 * +0
// whether the member ends inside a tile (the partner is masked) or at its end (the
// partner is built as zero).
//
// V must also provide dot2(acc, a, b), pack_bf16(lo, hi), load_bits(p, i, n),
// pair_rows(r0, r1, i, n) and keep_first(v) (Vec16Bf16 in kernels/avx512/attention.cpp).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/simd/attention_core.h"

namespace ds::simd {

// Whether flash attention over these K and V views takes the bf16 products.
template <class V>
bool bf16_pairs(const KvView& k, const KvView& v, int d_k) {
  return V::kBf16Dot && k.type == GgmlType::BF16 && v.type == GgmlType::BF16 && d_k % 2 == 0;
}

// Rows per tile of a pairs job: kAttnTile (128), or fewer where the V tile's (rows / 2) x
// v_ld floats would outgrow kTileFloats. K is never converted into scratch here.
inline int pairs_tile_rows(int v_ld) {
  return std::min(kAttnTile, 2 * (kTileFloats / v_ld) / 8 * 8);
}

// Floats per member of the packed q: d_k / 2 pairs, rounded up to whole pairs of vectors.
template <class V>
int q_pairs_stride(int d_k) {
  return (d_k + 2 * V::kWidth - 1) / (2 * V::kWidth) * V::kWidth;
}
// attend()'s packed q of a job: MLA 96 members of 288 floats (with 42 of 48, as kAccFloats /
// 2 allowed, MLA prefill:512/ctx:1024 ran ~8% slower), GQA 192 of 64.
constexpr int kQPairFloats = kAccFloats * 9 / 16;

// dst[i] = (bf16(q[2i]), bf16(q[2i + 1])) for 2i < n (n even), zero up to the stride.
template <class V>
void pack_q_pairs(const float* q, int n, float* dst) {
  constexpr int W = V::kWidth;
  int i = 0;
  for (; i + 2 * W <= n; i += 2 * W) V::store(dst + i / 2, V::pack_bf16(V::load(q + i), V::load(q + i + W)));
  if (i < n) {
    const typename V::T lo = V::load_tail(q, i, n);
    const typename V::T hi = i + W < n ? V::load_tail(q, i + W, n) : V::zero();
    V::store(dst + i / 2, V::pack_bf16(lo, hi));
  }
}

// A member's q, [qa (d_a) | qb (d_b)] (MLA: [q_abs | q_pe]; GQA: d_b = 0), packed as
// pack_q_pairs packs one row of d_a + d_b floats (MLA's two parts joined first: once per
// member and job, against the job's hundreds of thousands of products).
template <class V>
void pack_member_q(const AttnMember& m, int d_a, int d_b, float* dst) {
  if (d_b == 0) return pack_q_pairs<V>(m.qa, d_a, dst);
  alignas(64) float q[kMaxRowWidth];
  std::copy_n(m.qa, d_a, q);
  std::copy_n(m.qb, d_b, q + d_a);
  pack_q_pairs<V>(q, d_a + d_b, dst);
}

// softmax_tile, the weights then packed in place: p[0..nt) (scores, floats) becomes
// (nt + 1) / 2 pairs (bf16(e[2i]), bf16(e[2i + 1])), e[nt] taken as 0 for odd nt; each
// store lands on floats its loads already read. The same f32 operations as softmax_tile in
// the same order (l sums the unrounded weights). Packing the exponentials from registers
// rather than reloading them after softmax_tile's masked stores: prefill 8% faster.
template <class V>
float softmax_tile_pairs(float* p, int nt, float& m, float& l) {
  constexpr int W = V::kWidth;
  const float m_new = std::max(m, tile_max<V>(p, nt));
  const float corr = m_new == m ? 1.0f : std::exp(m - m_new);  // 0 on the first tile
  m = m_new;
  const typename V::T vm = V::set1(m_new);
  typename V::T sum = V::zero();
  for (int j = 0; j < nt; j += 2 * W) {
    const typename V::T lo = softmax_exp<V>(p, j, nt, vm);
    const typename V::T hi = j + W < nt ? softmax_exp<V>(p, j + W, nt, vm) : V::zero();
    sum = V::add(sum, lo);
    if (j + W < nt) sum = V::add(sum, hi);
    V::store(p + j / 2, V::pack_bf16(lo, hi));
  }
  l = l * corr + V::reduce_add(sum);
  return corr;
}

// Rows [j0, j0 + nt) of a BF16 view at byte offset off, d elements each, as (nt + 1) / 2
// rows of ld floats (ld >= d, whole vectors): pair row i holds (v[2i][c], v[2i + 1][c]),
// zero for c >= d and for the partner of an odd nt's last row. The rows [j0 + nt, j0 + nt
// + n_pf) (the next tile's) are prefetched two per pair row: in one burst before the tile
// a decode step over a cache in memory ran 1.8x slower.
template <class V>
void load_v_pairs(const KvView& kv, size_t off, int64_t j0, int nt, int d, int ld, float* dst, int n_pf) {
  KvRowWalk rows(kv, off, j0), pf(kv, off, j0 + nt);
  const size_t row_bytes = 2 * static_cast<size_t>(d);
  for (int r = 0; r < nt; r += 2) {
    for (int i = r; i < std::min(r + 2, n_pf); ++i) prefetch_row(pf.next(), row_bytes);
    const uint8_t* r0 = rows.next();
    const uint8_t* r1 = r + 1 < nt ? rows.next() : nullptr;
    float* out = dst + static_cast<size_t>(r / 2) * ld;
    for (int c = 0; c < ld; c += V::kWidth) V::store(out + c, V::pair_rows(r0, r1, c, d));
  }
  for (int i = nt + nt % 2; i < n_pf; ++i) prefetch_row(pf.next(), row_bytes);
}

// Full-tile members accumulated together on the pairs path: 6 x 4 accumulator registers of
// the 32 (4 as on the f32 paths: MLA prefill:512/ctx:1024 42.9-47.9 ms against 41.7-42.4,
// MLA decode at ctx 4096 586-612 us against 575-580; the V tile is re-read per group).
template <class V>
constexpr int kPairAccMembers = V::kWidth >= 16 ? 6 : 2;

// acc[m][0..d) = acc[m] * corr[m] + sum_i p2[m][i] . vp[i] for NM members over np pair rows
// of vp (ld floats each, zero past d). noinline, as accumulate_members.
template <class V, int NM>
[[gnu::noinline]] void accumulate_pairs(float* const* acc, const float* corr, bool first, const float* const* p2,
                                        const float* vp, int ld, int np, int d) {
  constexpr int W = V::kWidth, NC = kAccRegs;
  typename V::T vc[NM];
  for (int m = 0; m < NM; ++m) vc[m] = V::set1(corr[m]);
  int c0 = 0;
  for (; c0 + NC * W <= d; c0 += NC * W) {
    typename V::T r[NM][NC];
    for (int m = 0; m < NM; ++m)
      for (int k = 0; k < NC; ++k) r[m][k] = rescaled<V>(acc[m] + c0 + W * k, vc[m], first);
    const float* vi = vp + c0;
    for (int i = 0; i < np; ++i, vi += ld) {
      typename V::T v[NC];
      for (int k = 0; k < NC; ++k) v[k] = V::load(vi + W * k);
      for (int m = 0; m < NM; ++m) {
        const typename V::T pi = V::set1(p2[m][i]);
        for (int k = 0; k < NC; ++k) r[m][k] = V::dot2(r[m][k], pi, v[k]);
      }
    }
    for (int m = 0; m < NM; ++m)
      for (int k = 0; k < NC; ++k) V::store(acc[m] + c0 + W * k, r[m][k]);
  }
  for (; c0 < d; c0 += W)
    for (int m = 0; m < NM; ++m) {
      typename V::T r = first ? V::zero() : V::mul(V::load_tail(acc[m], c0, d), vc[m]);
      for (int i = 0; i < np; ++i) r = V::dot2(r, V::set1(p2[m][i]), V::load(vp + static_cast<size_t>(i) * ld + c0));
      V::store_tail(acc[m], c0, d, r);
    }
}

// accumulate_pairs for one member whose rows end inside the tile at nt_m: (nt_m + 1) / 2
// pair rows, the partner of an odd nt_m's last row masked to zero (it is a row the member
// does not see). Per element the operations of accumulate_pairs.
// NV registers of the member's accumulator from column c0 (NV * W columns, those at d or
// past it not stored): NV independent chains (one chain per pass ran latency-bound, 11% of
// a prefill's time).
template <class V, int NV>
void accumulate_pairs_chunk(float* acc, typename V::T vc, bool first, const float* p2, const float* vp, int ld, int np,
                            bool odd, int c0, int d) {
  constexpr int W = V::kWidth;
  typename V::T r[NV];
  for (int k = 0; k < NV; ++k) r[k] = first ? V::zero() : V::mul(V::load_tail(acc, c0 + W * k, d), vc);
  const float* vi = vp + c0;
  for (int i = 0; i < np; ++i, vi += ld) {
    const typename V::T pi = V::set1(p2[i]);
    const bool mask = odd && i == np - 1;
    for (int k = 0; k < NV; ++k) {
      const typename V::T v = V::load(vi + W * k);
      r[k] = V::dot2(r[k], pi, mask ? V::keep_first(v) : v);
    }
  }
  for (int k = 0; k < NV; ++k) V::store_tail(acc, c0 + W * k, d, r[k]);
}

template <class V>
void accumulate_pairs_partial(float* acc, float corr, bool first, const float* p2, const float* vp, int ld, int nt_m,
                              int d) {
  constexpr int W = V::kWidth, NV = 8;
  const int np = (nt_m + 1) / 2;
  const bool odd = nt_m % 2 != 0;
  const typename V::T vc = V::set1(corr);
  int c0 = 0;
  for (; c0 + NV * W <= d; c0 += NV * W) accumulate_pairs_chunk<V, NV>(acc, vc, first, p2, vp, ld, np, odd, c0, d);
  for (; c0 < d; c0 += W) accumulate_pairs_chunk<V, 1>(acc, vc, first, p2, vp, ld, np, odd, c0, d);
}

// fold_tile for a pairs job: softmax of each active member over its rows of the tile, its
// weights packed to bf16 pairs, and the V products over the tile's pair rows vp.
template <class V>
void fold_tile_pairs(const AttnJob& job, AttnState& st, const int* act, int n_act, int64_t j0, int nt, const float* vp,
                     int ld) {
  constexpr int NM = kPairAccMembers<V>;
  const bool first = j0 == 0;
  const int np = (nt + 1) / 2;
  int full[kAttnMaxGroup], n_full = 0;
  for (int i = 0; i < n_act; ++i) {
    const int im = act[i];
    const int nt_m = static_cast<int>(std::min<int64_t>(nt, job.mem[im].n_kv - j0));
    st.corr[im] = softmax_tile_pairs<V>(st.p[im], nt_m, st.m[im], st.l[im]);
    if (nt_m == nt)
      full[n_full++] = im;
    else
      accumulate_pairs_partial<V>(st.acc + static_cast<size_t>(im) * job.d_v, st.corr[im], first, st.p[im], vp, ld,
                                  nt_m, job.d_v);
  }
  auto group = [&]<int G>(int g) {
    float* acc[G];
    float corr[G];
    const float* p2[G];
    for (int m = 0; m < G; ++m) {
      acc[m] = st.acc + static_cast<size_t>(full[g + m]) * job.d_v;
      corr[m] = st.corr[full[g + m]];
      p2[m] = st.p[full[g + m]];
    }
    accumulate_pairs<V, G>(acc, corr, first, p2, vp, ld, np, job.d_v);
  };
  member_passes<NM>(n_full, group);
}

}  // namespace ds::simd
