// The ISA-independent part of flash attention (GQA) and absorbed MLA, shared by
// kernels/avx2/attention.cpp and kernels/avx512/attention.cpp. Each ISA file supplies a
// vector traits struct V (float vector ops of its width, an exp(), and its KV row
// converter); everything here is a template on V, so the two instantiations are distinct
// symbols compiled with their own flags (no inline function shared across ISA flags).
//
// attend(): a group of query heads that share one KV head (GQA: n_head / n_head_kv heads;
// MLA: all heads share the single latent row) walks the context in tiles of rows. Each
// tile's K (and V) rows are converted to float once for the whole group, scores for all
// heads of the group come from one pass over the tile, and an online softmax (running
// max, denominator and rescaled accumulator per head) folds the tile in. The full score
// row is never built. MLA is the case "K row = [c | k_pe], q = [q_abs | q_pe], V = c".
//
// Scratch is a fixed-size frame on the stack (about 100 KB): no allocation ever, so the
// decode step allocates nothing (STYLE.md habit 10). Shapes wider than it (K rows or V
// rows over kMaxRowWidth floats) go to the reference kernels.
//
// V must provide: T, kWidth, zero(), set1(f), load(p), store(p, v), load_tail(p, i, n)
// (lanes of p + i below n - i, zero above), store_tail(p, i, n, v), zero_tail(v, i, n),
// add, mul, sub, fmadd(a, b, c) = a * b + c, exp(v), reduce_add(v), and
// load_kv_row(type, src, dst, n) (n elements of one KV row to float).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/ref/ref.h"

namespace ds::simd {

constexpr int kAttnTile = 64;               // most rows per tile
constexpr size_t kAttnTileBytes = 16384;    // converted K tile kept within L1
constexpr int kAttnMaxGroup = 16;           // heads per pass: their accumulators stay in L1/L2
constexpr int kMaxRowWidth = 1024;          // widest K (d_k + d_rope) or V row the scratch holds
constexpr int kTileFloats = 8 * kMaxRowWidth;  // one K (or V) tile: 8 rows of the widest row
constexpr int kAccFloats = 8192;            // accumulators of one head group (16 heads x 512)

// Rows per tile for K rows of kw floats: a multiple of 8 in [8, kAttnTile] within
// kAttnTileBytes (MLA's 576-wide rows: 8; GQA heads of 128: 32). Measured: 64-row MLA
// tiles streamed from L2 for every head ran 4x slower. V rows of d_v floats must fit the
// V tile too (only shapes with d_v > 128 and narrow K rows are cut by that).
template <class V>
int tile_rows(int kw, int d_v) {
  const int rows = static_cast<int>(kAttnTileBytes / (sizeof(float) * static_cast<size_t>(kw))) / 8 * 8;
  const int v_rows = d_v > 0 ? kTileFloats / d_v / 8 * 8 : kAttnTile;
  return std::min(std::clamp(rows, 8, kAttnTile), v_rows);
}

struct AttnJob {
  int n_h = 0;
  const float* qa[kAttnMaxGroup];  // d_a wide
  const float* qb[kAttnMaxGroup];  // d_b wide (MLA's q_pe), unused when d_b == 0
  float* out[kAttnMaxGroup];       // d_v wide
  int d_a = 0, d_b = 0, d_v = 0;
  float scale = 1.0f;
  int64_t n_kv = 0;
  const KvView* k = nullptr;  // K rows: d_a + d_b elements at byte k_off of each row
  size_t k_off = 0;
  const KvView* v = nullptr;  // V rows at byte v_off; nullptr: V = first d_v of the K row
  size_t v_off = 0;
};

// acc[0..W NV) = acc * corr + sum_j p[j] * v[j][0..W NV), accumulators in registers.
template <class V, int NV>
void accumulate_chunk(float* acc, typename V::T corr, const float* p, const float* v, int ld, int nt) {
  typename V::T r[NV];
  for (int k = 0; k < NV; ++k) r[k] = V::mul(V::load(acc + V::kWidth * k), corr);
  for (int j = 0; j < nt; ++j) {
    const typename V::T pj = V::set1(p[j]);
    const float* vj = v + static_cast<size_t>(j) * ld;
    for (int k = 0; k < NV; ++k) r[k] = V::fmadd(pj, V::load(vj + V::kWidth * k), r[k]);
  }
  for (int k = 0; k < NV; ++k) V::store(acc + V::kWidth * k, r[k]);
}

// acc[0..d) = acc * corr + sum_j p[j] * v[j][0..d): 8-register chunks, then one-register
// steps, the last one masked.
template <class V>
void accumulate_v(float* acc, float corr, const float* p, const float* v, int ld, int nt, int d) {
  constexpr int W = V::kWidth;
  const typename V::T vc = V::set1(corr);
  int c0 = 0;
  for (; c0 + 8 * W <= d; c0 += 8 * W) accumulate_chunk<V, 8>(acc + c0, vc, p, v + c0, ld, nt);
  for (; c0 + W <= d; c0 += W) accumulate_chunk<V, 1>(acc + c0, vc, p, v + c0, ld, nt);
  if (c0 < d) {
    typename V::T r = V::mul(V::load_tail(acc, c0, d), vc);
    for (int j = 0; j < nt; ++j) r = V::fmadd(V::set1(p[j]), V::load_tail(v + static_cast<size_t>(j) * ld, c0, d), r);
    V::store_tail(acc, c0, d, r);
  }
}

// acc[h] += q[h][0..n) * k[0..n) lane-wise for NH heads: each K load serves NH heads.
template <class V, int NH>
void dot_heads(const float* const* q, const float* k, int n, typename V::T* acc) {
  int i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) {
    const typename V::T kv = V::load(k + i);
    for (int h = 0; h < NH; ++h) acc[h] = V::fmadd(V::load(q[h] + i), kv, acc[h]);
  }
  if (i < n) {
    const typename V::T kv = V::load_tail(k, i, n);
    for (int h = 0; h < NH; ++h) acc[h] = V::fmadd(V::load_tail(q[h], i, n), kv, acc[h]);
  }
}

// p[h][j] = (qa_h . k_j + qb_h . k_j[d_a..]) * scale for heads [h0, h0 + NH), rows j < nt.
template <class V, int NH>
void scores(const AttnJob& job, int h0, const float* kt, int kw, int nt, float (*p)[kAttnTile]) {
  for (int j = 0; j < nt; ++j) {
    const float* kr = kt + static_cast<size_t>(j) * kw;
    typename V::T acc[NH];
    for (int h = 0; h < NH; ++h) acc[h] = V::zero();
    dot_heads<V, NH>(job.qa + h0, kr, job.d_a, acc);
    if (job.d_b) dot_heads<V, NH>(job.qb + h0, kr + job.d_a, job.d_b, acc);
    for (int h = 0; h < NH; ++h) p[h0 + h][j] = V::reduce_add(acc[h]) * job.scale;
  }
}

// Online softmax step of one head over one tile: p[0..nt) becomes exp(p - m_new); the
// running max m and denominator l are updated; returns the correction exp(m_old - m_new).
template <class V>
float softmax_tile(float* p, int nt, float& m, float& l) {
  float tile_max = -INFINITY;
  for (int j = 0; j < nt; ++j) tile_max = std::max(tile_max, p[j]);
  const float m_new = std::max(m, tile_max);
  const float corr = std::exp(m - m_new);  // 0 on the first tile
  m = m_new;
  typename V::T sum = V::zero();
  for (int j = 0; j < nt; j += V::kWidth) {
    const typename V::T e = V::zero_tail(V::exp(V::sub(V::load_tail(p, j, nt), V::set1(m_new))), j, nt);
    V::store_tail(p, j, nt, e);
    sum = V::add(sum, e);
  }
  l = l * corr + V::reduce_add(sum);
  return corr;
}

// The converted rows [j0, j0 + nt) of a KV view at byte offset off, w floats each.
template <class V>
void load_tile(const KvView& kv, size_t off, int64_t j0, int nt, int w, float* dst) {
  for (int j = 0; j < nt; ++j) V::load_kv_row(kv.type, ref::kv_row(kv, j0 + j) + off, dst + static_cast<size_t>(j) * w, w);
}

template <class V>
void attend(const AttnJob& job) {
  alignas(64) float k_tile[kTileFloats];
  alignas(64) float v_tile[kTileFloats];
  alignas(64) float acc[kAccFloats];
  float m[kAttnMaxGroup], l[kAttnMaxGroup], p[kAttnMaxGroup][kAttnTile];
  const int kw = job.d_a + job.d_b;
  std::fill(acc, acc + static_cast<size_t>(job.n_h) * job.d_v, 0.0f);
  std::fill(m, m + job.n_h, -INFINITY);
  std::fill(l, l + job.n_h, 0.0f);
  const int tile = tile_rows<V>(kw, job.v ? job.d_v : 0);
  for (int64_t j0 = 0; j0 < job.n_kv; j0 += tile) {
    const int nt = static_cast<int>(std::min<int64_t>(tile, job.n_kv - j0));
    load_tile<V>(*job.k, job.k_off, j0, nt, kw, k_tile);
    if (job.v) load_tile<V>(*job.v, job.v_off, j0, nt, job.d_v, v_tile);
    const float* vt = job.v ? v_tile : k_tile;
    const int vld = job.v ? job.d_v : kw;
    // Scores for 4 heads per pass over each K row, then one head at a time.
    int h = 0;
    for (; h + 4 <= job.n_h; h += 4) scores<V, 4>(job, h, k_tile, kw, nt, p);
    for (; h < job.n_h; ++h) scores<V, 1>(job, h, k_tile, kw, nt, p);
    for (int ih = 0; ih < job.n_h; ++ih) {
      const float corr = softmax_tile<V>(p[ih], nt, m[ih], l[ih]);
      accumulate_v<V>(acc + static_cast<size_t>(ih) * job.d_v, corr, p[ih], vt, vld, nt, job.d_v);
    }
  }
  for (int ih = 0; ih < job.n_h; ++ih) {
    const typename V::T inv = V::set1(1.0f / l[ih]);
    const float* a = acc + static_cast<size_t>(ih) * job.d_v;
    for (int i = 0; i < job.d_v; i += V::kWidth) V::store_tail(job.out[ih], i, job.d_v, V::mul(V::load_tail(a, i, job.d_v), inv));
  }
}

// Heads per job: at most kAttnMaxGroup, and their accumulators fit kAccFloats.
template <class V>
int max_group(int d_v) { return std::min(kAttnMaxGroup, kAccFloats / d_v); }

template <class V>
void flash_attn(const AttnArgs& a) {
  if (a.d_k > kMaxRowWidth || a.d_v > kMaxRowWidth) return ref::flash_attn(a);
  const int group = a.n_head / a.n_head_kv;
  const int max_h = max_group<V>(a.d_v);
  for (int64_t it = 0; it < a.n_q; ++it)
    for (int h0 = a.head_begin; h0 < a.head_end;) {
      // Heads [h0, h1) share KV head h0 / group.
      const int kvh = h0 / group;
      const int h1 = std::min({a.head_end, (kvh + 1) * group, h0 + max_h});
      AttnJob job;
      job.n_h = h1 - h0;
      for (int h = h0; h < h1; ++h) {
        job.qa[h - h0] = a.q + it * a.q_tok_stride + h * a.q_head_stride;
        job.out[h - h0] = a.out + it * a.out_tok_stride + h * a.out_head_stride;
      }
      job.d_a = a.d_k;
      job.d_v = a.d_v;
      job.scale = a.scale;
      job.n_kv = static_cast<int64_t>(a.q_pos[it]) + 1;
      job.k = &a.k;
      job.k_off = static_cast<size_t>(kvh) * a.k.head_offset;
      job.v = &a.v;
      job.v_off = static_cast<size_t>(kvh) * a.v.head_offset;
      attend<V>(job);
      h0 = h1;
    }
}

template <class V>
void mla_attn(const MlaArgs& a) {
  if (a.kv_lora + a.n_rope > kMaxRowWidth) return ref::mla_attn(a);
  const int max_h = max_group<V>(a.kv_lora);
  for (int64_t it = 0; it < a.n_q; ++it)
    for (int h0 = a.head_begin; h0 < a.head_end; h0 += max_h) {
      const int h1 = std::min(a.head_end, h0 + max_h);
      AttnJob job;
      job.n_h = h1 - h0;
      for (int h = h0; h < h1; ++h) {
        job.qa[h - h0] = a.q_abs + it * a.q_tok_stride + h * a.q_head_stride;
        job.qb[h - h0] = a.q_pe + it * a.q_tok_stride + h * a.q_head_stride;
        job.out[h - h0] = a.out + it * a.out_tok_stride + h * a.out_head_stride;
      }
      job.d_a = a.kv_lora;
      job.d_b = a.n_rope;
      job.d_v = a.kv_lora;
      job.scale = a.scale;
      job.n_kv = static_cast<int64_t>(a.q_pos[it]) + 1;
      job.k = &a.kv;
      attend<V>(job);
    }
}

}  // namespace ds::simd
