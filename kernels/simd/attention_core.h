// The building blocks of the attention driver (kernels/simd/attention_driver.h, whose
// header describes the design and V's requirements): job and tile sizes, a job's members,
// the two forms of scores (rows in lanes for MLA, keys in lanes for GQA), the online
// softmax, the V accumulation and the tile path's fold of one tile.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/kernels.h"

namespace ds::simd {

constexpr int kAttnTile = 128;                  // most rows per tile (bf16 pairs; the f32 paths 64)
constexpr int kAttnTileF32 = 64;                // most rows per tile of the f32 paths (tile_rows)
constexpr size_t kAttnTileBytes = 32768;        // converted K tile (GQA heads of 128: 64 rows)
constexpr int kAttnMaxGroup = 192;              // members per job: 32 queries x 6 GQA heads
constexpr int kMaxRowWidth = 1024;              // widest K (d_k + d_rope) or V row the scratch holds
constexpr int kTileFloats = 16 * kMaxRowWidth;  // one K (or V) tile: 16 rows of the widest row
constexpr int kAccFloats = 49152;               // accumulators of one job (192 x 128, 96 x 512)

// The L1 data cache in bytes; 32 KB when unknown. Defined in kernels/dispatch/dispatch.cpp (base
// ISA flags): an inline definition here would be compiled once per ISA.
size_t l1d_bytes();

// Rows per tile for K rows of kw floats: a multiple of 8 in [8, kAttnTileF32] within
// kAttnTileBytes (GQA heads of 128: 64), and at least 16 for rows as wide as MLA's 576
// where 16 of them fit in 5/6 of L1 (48 KB L1D: Zen 5, Golden Cove; 8 rows on 32 KB
// cores). The online softmax and the accumulators' rescaling are paid per tile: measured
// on Zen 5, 16 rows instead of 8 ran MLA decode at 16K context 15% faster (5.5 -> 4.7 ms)
// and prefill 3-5%; 64-row MLA tiles streamed from L2 4x slower. GQA tiles of 64 rows
// instead of 32 ran prefill:512/ctx:1024 ~10% faster once GQA scores had keys in lanes
// (transposed in 32-row chunks, so a chunk's K stays in L1); with rows in lanes they had
// run 10% slower. V rows of d_v floats must fit the V tile too (only shapes with d_v >
// 128 and narrow K rows are cut by that). A machine's tile sizes never change, so tiles
// start at the same positions for every query ([BATCH_INVARIANT]).
template <class V>
int tile_rows(int kw, int d_v) {
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(kw);
  int rows = static_cast<int>(kAttnTileBytes / row_bytes) / 8 * 8;
  if (rows < 16 && 16 * row_bytes <= l1d_bytes() / 6 * 5) rows = 16;
  const int v_rows = d_v > 0 ? kTileFloats / d_v / 8 * 8 : kAttnTileF32;
  return std::min({std::clamp(rows, 8, kAttnTileF32), v_rows, kTileFloats / kw / 8 * 8});
}

// Prefetches the `bytes` bytes of one KV row (a long context's cache comes from memory, in
// blocks that the hardware prefetchers do not follow from one to the next).
inline void prefetch_row(const uint8_t* row, size_t bytes) {
  for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 3);
}

// One (query, head) pair of a job.
struct AttnMember {
  const float* qa = nullptr;  // d_a wide
  const float* qb = nullptr;  // d_b wide (MLA's q_pe), unused when d_b == 0
  float* out = nullptr;       // d_v wide
  int64_t n_kv = 0;           // attends to KV rows [0, n_kv)
  float sink = -INFINITY;     // AttnArgs::sinks: the online softmax's start (m = sink, l = 1)
};
// The online softmax's starting denominator: 1 for a sink (its exp(sink - m) at m = sink).
inline float sink_l0(float sink) {
  return sink == -INFINITY ? 0.0f : 1.0f;
}

struct AttnJob {
  int n_m = 0;
  bool pairs = false;  // bf16 dot products over a BF16 cache (attention_bf16.h)
  AttnMember mem[kAttnMaxGroup];
  int d_a = 0, d_b = 0, d_v = 0;
  float scale = 1.0f;
  const KvView* k = nullptr;  // K rows: d_a + d_b elements at byte k_off of each row
  size_t k_off = 0;
  const KvView* v = nullptr;  // V rows at byte v_off; nullptr: V = first d_v of the K row
  size_t v_off = 0;
};

// Members scored together, tile rows per score block, members accumulated together and
// registers per member in that accumulation: within 16 (AVX2) or 32 (AVX-512) registers.
template <class V, int NM>
constexpr int kScoreRows = std::min(V::kWidth / NM, 8);
template <class V>
constexpr int kAccMembers = V::kWidth >= 16 ? 4 : 2;
constexpr int kAccRegs = 4;

// acc[m * NR + r] += q[m][i] * K_r[i] lane-wise over the whole vectors of [0, n), K_r's
// vector at i being load_k(r, i); returns where the whole vectors end. Each K load serves NM
// members, each q load NR rows; the fma order per (m, r) depends on neither. The tile path
// (dot_block) and the direct path (direct_dot) both run this loop, which is what keeps a
// query's scores bit-identical between them ([BATCH_INVARIANT]).
template <class V, int NM, int NR, class LoadK>
[[gnu::always_inline]] inline int dot_vectors(const float* const* q, int n, LoadK load_k, typename V::T* acc) {
  int i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) {
    typename V::T kr[NR];
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) kr[r] = load_k(r, i);
#pragma GCC unroll 8
    for (int m = 0; m < NM; ++m) {
      const typename V::T qm = V::load(q[m] + i);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) acc[m * NR + r] = V::fmadd(qm, kr[r], acc[m * NR + r]);
    }
  }
  return i;
}

// dot_vectors over float rows k_r = k + r * ldk, and a masked step for a partial last vector.
template <class V, int NM, int NR>
[[gnu::always_inline]] inline void dot_block(const float* const* q, const float* k, int ldk, int n,
                                             typename V::T* acc) {
  const int i = dot_vectors<V, NM, NR>(
      q, n, [&](int r, int j) { return V::load(k + static_cast<size_t>(r) * ldk + j); }, acc);
  if (i < n) {
    typename V::T kr[NR];
    for (int r = 0; r < NR; ++r) kr[r] = V::load_tail(k + static_cast<size_t>(r) * ldk, i, n);
    for (int m = 0; m < NM; ++m) {
      const typename V::T qm = V::load_tail(q[m], i, n);
      for (int r = 0; r < NR; ++r) acc[m * NR + r] = V::fmadd(qm, kr[r], acc[m * NR + r]);
    }
  }
}

// p[mi[m]][j] = (qa . k_j + qb . k_j[d_a..]) * scale for the NM members mi[0..NM) and
// tile rows r_begin <= j < r_end (multiples of 8; rows past the tile's valid rows are
// zero). Rows pf[r_begin..r_end) (bytes each) are prefetched, NR per score block, when pf
// is not null.
template <class V, int NM>
void score_members(const AttnJob& job, const int* mi, const float* kt, int kw, int r_begin, int r_end,
                   float (*p)[kAttnTile], const uint8_t* const* pf, size_t pf_bytes) {
  constexpr int W = V::kWidth, NR = kScoreRows<V, NM>;
  const float* qa[NM];
  const float* qb[NM];
  for (int m = 0; m < NM; ++m) {
    qa[m] = job.mem[mi[m]].qa;
    qb[m] = job.mem[mi[m]].qb;
  }
  alignas(64) float s[W];
  for (int r0 = r_begin; r0 < r_end; r0 += NR) {
    if (pf)
      for (int r = 0; r < NR; ++r) prefetch_row(pf[r0 + r], pf_bytes);
    typename V::T acc[W];  // a local array: with dot_block inlined it lives in registers
    for (int k = 0; k < W; ++k) acc[k] = V::zero();
    const float* k0 = kt + static_cast<size_t>(r0) * kw;
    dot_block<V, NM, NR>(qa, k0, kw, job.d_a, acc);
    if (job.d_b) dot_block<V, NM, NR>(qb, k0 + job.d_a, kw, job.d_b, acc);
    V::store(s, V::mul(V::reduce_block(acc), V::set1(job.scale)));
    // Member m's NR scores are lanes [m NR, m NR + NR): one NR-float copy each (one vector
    // load and store; element by element it was 2 NR scalar moves per member).
    for (int m = 0; m < NM; ++m) std::memcpy(&p[mi[m]][r0], s + m * NR, sizeof(float) * NR);
  }
}

// Scores of the members act[0..n_act) over one tile (MLA), 8 rows at a time: within them
// 4 members per block, then 2, then 1. The first block of members prefetches the 8 rows'
// pf[] (pf_bytes each) as it goes. Rows outermost keep an 8-row slice of the K tile (18 KB
// for MLA's 576-wide rows) in L1 while every member's queries pass by; members outermost
// read all 16 rows (36 KB) per block of 4 members. bench_kernels MLA prefill:512/ctx:1024,
// 1 thread, medians of 4 alternated rounds: 95.6 -> 89.1 ms, and 91.7 -> 90.0 in another set.
template <class V>
void scores(const AttnJob& job, const int* act, int n_act, const float* kt, int kw, int n_rows, float (*p)[kAttnTile],
            const uint8_t* const* pf, size_t pf_bytes) {
  for (int rb = 0; rb < n_rows; rb += 8) {
    int i = 0;
    const uint8_t* const* f = pf;
    for (; i + 4 <= n_act; i += 4, f = nullptr) score_members<V, 4>(job, act + i, kt, kw, rb, rb + 8, p, f, pf_bytes);
    for (; i + 2 <= n_act; i += 2, f = nullptr) score_members<V, 2>(job, act + i, kt, kw, rb, rb + 8, p, f, pf_bytes);
    for (; i < n_act; ++i, f = nullptr) score_members<V, 1>(job, act + i, kt, kw, rb, rb + 8, p, f, pf_bytes);
  }
}

// f.template operator()<G>(g0) for the member groups of n members: passes of P, then the
// remainder as one pass of its own width.
template <int P, class F, int... R>
void member_passes_impl(int n, F&& f, std::integer_sequence<int, R...>) {
  int g = 0;
  for (; g + P <= n; g += P) f.template operator()<P>(g);
  const int rest = n - g;
  ((rest == R + 1 ? (f.template operator()<R + 1>(g), 0) : 0), ...);
}
template <int P, class F>
void member_passes(int n, F&& f) {
  member_passes_impl<P>(n, f, std::make_integer_sequence<int, P - 1>{});
}

// ---- GQA scores with keys in lanes ----
//
// A GQA tile's K rows are written transposed, kT[d][j] (ldT floats per d: the tile's rows
// rounded up to whole vectors), and each score accumulates in one lane: s[m][j] =
// fma(q[m][d], kT[d][j], s[m][j]) for d = 0, 1, ..., d_k - 1 in order. Members x key vectors
// of accumulators, one broadcast of q[m][d] per member and one load per key vector and d,
// and no reduction: measured on Zen 5 (one thread, 32 x 128 tile, 96 members) 200-210
// GFLOPS against 118-126 for the row form and its reduction tree. A score's fma chain is
// the same whatever members and key vectors share its block, and the tile path (attend)
// and the decode path (attend_direct) both run it ([BATCH_INVARIANT]). MLA keeps the row
// form above: its 576-wide rows pay less for the reduction and would need 32-row tiles.

// Key vectors per score block, members per score pass (AVX-512: 16 accumulators, 2 key
// registers and 8 broadcasts; AVX2: 8, 2 and 4).
constexpr int kKeyVecs = 2;
template <class V>
constexpr int kKeyMembers = V::kWidth >= 16 ? 8 : 4;

// The transposed chunk's floats per d: its rows (at most kScoreChunk) rounded up to whole
// vectors. ldT * kw stays within kTileFloats for every tile_rows() shape: tiles of 8 or 16
// rows round up to 16, and 16 rows of 1024 floats are kTileFloats; tiles of 24 or more
// rows come from the 32 KB rule (kw <= 341), and 32 rows of 341 floats are 10,912.
template <class V>
int transposed_rows(int nt) {
  return (nt + V::kWidth - 1) / V::kWidth * V::kWidth;
}

// kT[d * ldT + j] = element d of tile row j for j < ldT (a multiple of kWidth), d < kw,
// row j's vector at d being load(j, d). Rows pf[0..n_pf) (pf_bytes each) are prefetched,
// spread over the blocks, when pf is not null.
template <class V, class Load>
[[gnu::always_inline]] inline void transpose_tile(Load load, int ldT, int kw, float* kT, const uint8_t* const* pf,
                                                  int n_pf, size_t pf_bytes) {
  constexpr int W = V::kWidth;
  const int nb = ldT / W * ((kw + W - 1) / W);
  int b = 0;
  for (int j0 = 0; j0 < ldT; j0 += W)
    for (int d0 = 0; d0 < kw; d0 += W, ++b) {
      if (pf)
        for (int i = b * n_pf / nb; i < (b + 1) * n_pf / nb; ++i) prefetch_row(pf[i], pf_bytes);
      typename V::T blk[W];
#pragma GCC unroll 16
      for (int r = 0; r < W; ++r) blk[r] = load(j0 + r, d0);
      V::transpose(blk);
      const int nc = std::min(W, kw - d0);
      for (int c = 0; c < nc; ++c) V::store(kT + static_cast<size_t>(d0 + c) * ldT + j0, blk[c]);
    }
}

// p[m][j0 + j] = scale * (q[m] . column j0 + j of kT) for NM members and the NK key vectors
// from j0: one fma chain per lane over d in order.
//
// kPairs (attention_bf16.h): q and kT hold bf16 pairs in 32-bit elements and kw counts
// pairs; each step is one bf16 dot product of a pair of q with a pair of K.
template <class V, int NM, int NK, bool kPairs = false>
[[gnu::always_inline]] inline void score_keys(const float* const* q, const float* kT, int ldT, int kw, int j0,
                                              float scale, float* const* p) {
  constexpr int W = V::kWidth;
  typename V::T acc[NM][NK];
#pragma GCC unroll 8
  for (int m = 0; m < NM; ++m)
#pragma GCC unroll 4
    for (int k = 0; k < NK; ++k) acc[m][k] = V::zero();
  const float* kd = kT + j0;
  for (int d = 0; d < kw; ++d, kd += ldT) {
    typename V::T kv[NK];
#pragma GCC unroll 4
    for (int k = 0; k < NK; ++k) kv[k] = V::load(kd + k * W);
#pragma GCC unroll 8
    for (int m = 0; m < NM; ++m) {
      const typename V::T qm = V::set1(q[m][d]);
#pragma GCC unroll 4
      for (int k = 0; k < NK; ++k) {
        if constexpr (kPairs)
          acc[m][k] = V::dot2(acc[m][k], qm, kv[k]);
        else
          acc[m][k] = V::fmadd(qm, kv[k], acc[m][k]);
      }
    }
  }
  const typename V::T vs = V::set1(scale);
#pragma GCC unroll 8
  for (int m = 0; m < NM; ++m)
#pragma GCC unroll 4
    for (int k = 0; k < NK; ++k) V::store(p[m] + j0 + k * W, V::mul(acc[m][k], vs));
}

// Scores of NM members over all ldT columns of kT: kKeyVecs key vectors per block, then one.
template <class V, int NM, bool kPairs>
[[gnu::noinline]] void score_members_t(const float* const* q, const float* kT, int ldT, int kw, float scale,
                                       float* const* p) {
  constexpr int W = V::kWidth;
  int j0 = 0;
  for (; j0 + kKeyVecs * W <= ldT; j0 += kKeyVecs * W)
    score_keys<V, NM, kKeyVecs, kPairs>(q, kT, ldT, kw, j0, scale, p);
  for (; j0 < ldT; j0 += W) score_keys<V, NM, 1, kPairs>(q, kT, ldT, kw, j0, scale, p);
}

// Scores of the members q[0..n) (their rows of p: p[0..n)) over the ldT columns of kT.
template <class V, bool kPairs>
void scores_t(const float* const* q, int n, const float* kT, int ldT, int kw, float scale, float* const* p) {
  member_passes<kKeyMembers<V>>(n,
                                [&]<int G>(int g) { score_members_t<V, G, kPairs>(q + g, kT, ldT, kw, scale, p + g); });
}

// Keys-in-lanes scores of the members q[0..n) (their rows of p: p[0..n)) over a tile's nt
// rows, row r's vector at d being load(r, d): chunks of kScoreChunk rows are transposed into
// kT (16 KB for rows of 128) and scored in turn, so a 64-row tile's scores work within L1
// beside its V rows. Rows pf[0..n_pf) (pf_bytes each) are prefetched over the
// transpositions when pf is not null. kPairs: as score_keys (kw counts pairs, load returns
// pairs).
constexpr int kScoreChunk = 32;
template <class V, bool kPairs = false, class Load>
void scores_by_chunks(Load load, int nt, int kw, const float* const* q, int n, float scale, float* const* p, float* kT,
                      const uint8_t* const* pf, int n_pf, size_t pf_bytes) {
  float* pc[kAttnMaxGroup];
  for (int c0 = 0; c0 < nt; c0 += kScoreChunk) {
    const int rows = std::min(kScoreChunk, nt - c0), ldT = transposed_rows<V>(rows);
    const int pf0 = c0 * n_pf / nt, pf1 = (c0 + rows) * n_pf / nt;
    transpose_tile<V>([&](int r, int d) { return load(c0 + std::min(r, rows - 1), d); }, ldT, kw, kT,
                      pf ? pf + pf0 : nullptr, pf1 - pf0, pf_bytes);
    for (int m = 0; m < n; ++m) pc[m] = p[m] + c0;
    scores_t<V, kPairs>(q, n, kT, ldT, kw, scale, pc);
  }
}

// acc * corr, the accumulator's start on a tile; on the first tile corr is 0 and acc was
// never written: +0, the same bits as 0 * 0.
template <class V>
[[gnu::always_inline]] inline typename V::T rescaled(const float* acc, typename V::T corr, bool first) {
  return first ? V::zero() : V::mul(V::load(acc), corr);
}

// acc[0..W NV) = acc * corr + sum_j p[j] * v[j][0..W NV), accumulators in registers.
template <class V, int NV>
void accumulate_chunk(float* acc, typename V::T corr, bool first, const float* p, const float* v, int ld, int nt) {
  typename V::T r[NV];
  for (int k = 0; k < NV; ++k) r[k] = rescaled<V>(acc + V::kWidth * k, corr, first);
  for (int j = 0; j < nt; ++j) {
    const typename V::T pj = V::set1(p[j]);
    const float* vj = v + static_cast<size_t>(j) * ld;
    for (int k = 0; k < NV; ++k) r[k] = V::fmadd(pj, V::load(vj + V::kWidth * k), r[k]);
  }
  for (int k = 0; k < NV; ++k) V::store(acc + V::kWidth * k, r[k]);
}

// acc[c..d) = acc * corr + sum_j p[j] * v[j][c..d) for one member, from column c0:
// 8-register chunks, then one-register steps, the last one masked. first: the member's
// first tile (acc not yet written).
template <class V>
void accumulate_v(float* acc, float corr, bool first, const float* p, const float* v, int ld, int nt, int d,
                  int c0 = 0) {
  constexpr int W = V::kWidth;
  const typename V::T vc = V::set1(corr);
  for (; c0 + 8 * W <= d; c0 += 8 * W) accumulate_chunk<V, 8>(acc + c0, vc, first, p, v + c0, ld, nt);
  for (; c0 + W <= d; c0 += W) accumulate_chunk<V, 1>(acc + c0, vc, first, p, v + c0, ld, nt);
  if (c0 < d) {
    typename V::T r = first ? V::zero() : V::mul(V::load_tail(acc, c0, d), vc);
    for (int j = 0; j < nt; ++j) r = V::fmadd(V::set1(p[j]), V::load_tail(v + static_cast<size_t>(j) * ld, c0, d), r);
    V::store_tail(acc, c0, d, r);
  }
}

// accumulate_v for NM members over the same nt V rows: each V load serves NM members.
// Per element the same operations as accumulate_v (acc * corr, then fma per row).
// noinline: inlined into attend(), GCC spilled the 4 V registers to the stack on every row
// (measured: MLA prefill 1.6x slower).
template <class V, int NM>
[[gnu::noinline]] void accumulate_members(float* const* acc, const float* corr, bool first, const float* const* p,
                                          const float* v, int ld, int nt, int d) {
  constexpr int W = V::kWidth, NC = kAccRegs;
  static_assert(NC == 4, "the row loop below names its 4 V registers");
  typename V::T vc[NM];
  const float* pm[NM];
  for (int m = 0; m < NM; ++m) {
    vc[m] = V::set1(corr[m]);
    pm[m] = p[m];
  }
  int c0 = 0;
  for (; c0 + NC * W <= d; c0 += NC * W) {
    typename V::T r[NM][NC];
    for (int m = 0; m < NM; ++m)
      for (int k = 0; k < NC; ++k) r[m][k] = rescaled<V>(acc[m] + c0 + W * k, vc[m], first);
    const float* vj = v + c0;
    for (int j = 0; j < nt; ++j, vj += ld) {
      const typename V::T v0 = V::load(vj), v1 = V::load(vj + W), v2 = V::load(vj + 2 * W), v3 = V::load(vj + 3 * W);
      for (int m = 0; m < NM; ++m) {
        const typename V::T pj = V::set1(pm[m][j]);
        r[m][0] = V::fmadd(pj, v0, r[m][0]);
        r[m][1] = V::fmadd(pj, v1, r[m][1]);
        r[m][2] = V::fmadd(pj, v2, r[m][2]);
        r[m][3] = V::fmadd(pj, v3, r[m][3]);
      }
    }
    for (int m = 0; m < NM; ++m)
      for (int k = 0; k < NC; ++k) V::store(acc[m] + c0 + W * k, r[m][k]);
  }
  if (c0 < d)
    for (int m = 0; m < NM; ++m) accumulate_v<V>(acc[m], corr[m], first, p[m], v, ld, nt, d, c0);
}

// The largest of p[0..nt).
template <class V>
float tile_max(const float* p, int nt) {
  typename V::T vmax = V::set1(-INFINITY);
  int j = 0;
  for (; j + V::kWidth <= nt; j += V::kWidth) vmax = V::max(V::load(p + j), vmax);
  float mx = V::reduce_max(vmax);
  for (; j < nt; ++j) mx = std::max(mx, p[j]);
  return mx;
}

// exp(p[j..) - m) for the lanes below nt, zero above: whole vectors take plain loads (the
// scores were stored whole), only a row's last partial vector a masked one.
template <class V>
[[gnu::always_inline]] inline typename V::T softmax_exp(const float* p, int j, int nt, typename V::T m) {
  if (j + V::kWidth <= nt) return V::exp(V::sub(V::load(p + j), m));
  return V::zero_tail(V::exp(V::sub(V::load_tail(p, j, nt), m)), j, nt);
}

// Online softmax step of one member over one tile: p[0..nt) becomes exp(p - m_new); the
// running max m and denominator l are updated; returns the correction exp(m_old - m_new),
// exactly 1 when the maximum did not move.
template <class V>
float softmax_tile(float* p, int nt, float& m, float& l) {
  const float m_new = std::max(m, tile_max<V>(p, nt));
  const float corr = m_new == m ? 1.0f : std::exp(m - m_new);  // 0 on the first tile
  m = m_new;
  const typename V::T vm = V::set1(m_new);
  typename V::T sum = V::zero();
  for (int j = 0; j < nt; j += V::kWidth) {
    const typename V::T e = softmax_exp<V>(p, j, nt, vm);
    V::store_tail(p, j, nt, e);
    sum = V::add(sum, e);
  }
  l = l * corr + V::reduce_add(sum);
  return corr;
}

// Walks the rows j, j + 1, ... of a KV view at byte offset off: one division at the
// start, then a row stride within each block and a block-table lookup at each block edge.
class KvRowWalk {
 public:
  KvRowWalk(const KvView& kv, size_t off, int64_t j)
      : kv_(kv), off_(off), blk_(j / kv.block_size), in_(static_cast<int>(j % kv.block_size)) {}
  const uint8_t* next() {
    if (in_ == kv_.block_size) {
      in_ = 0;
      ++blk_;
    }
    return kv_.blocks[blk_] + static_cast<size_t>(in_++) * kv_.row_stride + kv_.elem_offset + off_;
  }

 private:
  const KvView& kv_;
  size_t off_;
  int64_t blk_;
  int in_;
};

// Prefetches rows [j0, j0 + n) of a KV view at byte offset off, `bytes` of each.
inline void prefetch_rows(const KvView& kv, size_t off, int64_t j0, int n, size_t bytes) {
  if (n <= 0) return;
  KvRowWalk rows(kv, off, j0);
  for (int j = 0; j < n; ++j) prefetch_row(rows.next(), bytes);
}

// The next nt rows of a walk into rows[]; entries past nt up to n_rows repeat the first
// (their scores are never used).
inline void next_rows(KvRowWalk& walk, int nt, int n_rows, const uint8_t** rows) {
  for (int j = 0; j < nt; ++j) rows[j] = walk.next();
  for (int j = nt; j < n_rows; ++j) rows[j] = rows[0];
}

// The converted rows [j0, j0 + nt) of a KV view at byte offset off, w floats each.
template <class V>
void load_tile(const KvView& kv, size_t off, int64_t j0, int nt, int w, float* dst) {
  KvRowWalk rows(kv, off, j0);
  for (int j = 0; j < nt; ++j) V::load_kv_row(kv.type, rows.next(), dst + static_cast<size_t>(j) * w, w);
}

// The online softmax state of a job's members.
struct AttnState {
  alignas(64) float acc[kAccFloats];  // [member][d_v]
  float m[kAttnMaxGroup], l[kAttnMaxGroup], corr[kAttnMaxGroup];
  float p[kAttnMaxGroup][kAttnTile];
};

// accumulate_members for the NM full-tile members mem[0..NM) of a job.
template <class V, int NM>
void accumulate_group(const AttnJob& job, AttnState& st, const int* mem, bool first, const float* vt, int vld, int nt) {
  float* acc[NM];
  float corr[NM];
  const float* p[NM];
  for (int m = 0; m < NM; ++m) {
    acc[m] = st.acc + static_cast<size_t>(mem[m]) * job.d_v;
    corr[m] = st.corr[mem[m]];
    p[m] = st.p[mem[m]];
  }
  accumulate_members<V, NM>(acc, corr, first, p, vt, vld, nt, job.d_v);
}

// Softmax and V accumulation of the active members over a tile of nt rows starting at
// j0: members whose limit covers the whole tile are accumulated kAccMembers at a time,
// a member ending inside the tile alone over its own rows.
template <class V>
void fold_tile(const AttnJob& job, AttnState& st, const int* act, int n_act, int64_t j0, int nt, const float* vt,
               int vld) {
  constexpr int NM = kAccMembers<V>;
  const bool first = j0 == 0;  // every member takes part in the first tile (n_kv >= 1)
  int full[kAttnMaxGroup], n_full = 0;
  for (int i = 0; i < n_act; ++i) {
    const int im = act[i];
    const int nt_m = static_cast<int>(std::min<int64_t>(nt, job.mem[im].n_kv - j0));
    st.corr[im] = softmax_tile<V>(st.p[im], nt_m, st.m[im], st.l[im]);
    if (nt_m == nt) {
      full[n_full++] = im;
    } else {
      accumulate_v<V>(st.acc + static_cast<size_t>(im) * job.d_v, st.corr[im], first, st.p[im], vt, vld, nt_m, job.d_v);
    }
  }
  int i = 0;
  for (; i + NM <= n_full; i += NM) accumulate_group<V, NM>(job, st, full + i, first, vt, vld, nt);
  if constexpr (NM > 2) {
    if (i + 2 <= n_full) {  // 6 GQA heads = 4 + 2 (a Q8_0-cache decode step)
      accumulate_group<V, 2>(job, st, full + i, first, vt, vld, nt);
      i += 2;
    }
  }
  for (; i < n_full; ++i)
    accumulate_v<V>(st.acc + static_cast<size_t>(full[i]) * job.d_v, st.corr[full[i]], first, st.p[full[i]], vt, vld,
                    nt, job.d_v);
}

}  // namespace ds::simd
