// The ISA-independent part of flash attention (GQA) and absorbed MLA, shared by
// kernels/avx2/attention.cpp and kernels/avx512/attention.cpp. Each ISA file supplies a
// vector traits struct V (float vector ops of its width, an exp(), a block reduction, a
// block transpose and its KV row converter); everything here is a template on V, so the two
// instantiations are distinct symbols compiled with their own flags (no inline function
// shared across ISA flags). This file holds the tile path (attend()) and the entry points;
// attention_core.h the pieces both paths share (job and tile sizes, scores, softmax, V
// accumulation), attention_decode.h the decode path (attend_direct()).
//
// attend(): a job's members are (query, head) pairs that read the same KV rows: several
// consecutive queries of one sequence times the query heads sharing one KV head (GQA:
// n_head / n_head_kv heads; MLA: all heads share the single latent row). Each member has
// its own causal limit n_kv = q_pos + 1. The job walks the context in tiles of rows; each
// tile's K (and V) rows are converted to float once for all members (a prefill chunk no
// longer converts the cache once per query), and an online softmax (running max,
// denominator and rescaled accumulator per member) folds the tile in. The full score row
// is never built. Tiles past the largest n_kv are never read; a member whose n_kv ends
// before a tile takes no part in it, one whose n_kv ends inside a tile uses only its rows
// of it. MLA is the case "K row = [c | k_pe], q = [q_abs | q_pe], V = c".
//
// Decode jobs (every member at one position: a query's heads) over an f32/f16/bf16 cache
// take attend_direct() instead, which converts K and V inside the products rather than into
// scratch; its arithmetic per member is attend()'s, so either path gives the same bits.
//
// Scores are a small GEMM. GQA keeps keys in lanes: the tile's K rows are transposed and
// each score is one lane's fma chain over d (attention_core.h, "GQA scores with keys in
// lanes"). MLA keeps rows in lanes: NM members x NR tile rows accumulate lane-wise in
// kWidth registers (each K load serves NM members, each q load NR rows), and one
// transposing reduction turns the kWidth accumulators into kWidth scores. Over a BF16 cache
// with bf16 dot products (attention_bf16.h) both take the pairs path: keys in lanes, K rows
// transposed as pairs straight from the cache (MLA: V = the same rows' first kv_lora).
//
// [BATCH_INVARIANT] A member's output depends only on its own q, n_kv and the cache: its
// scores are the same fused multiply-adds in the same order (GQA: one chain over d per
// score; MLA: the same chains and the same reduction tree, V::reduce_block reducing every
// lane with one fixed tree whatever sits in the other lanes) for any grouping of members
// and rows; tiles start at fixed positions (multiples of the tile size); its
// softmax and V accumulation see exactly its own rows, per element the same operations
// (acc * corr, then one fma per row in row order) whether it is accumulated alone or with
// other members. So a query's output is bit-identical whatever other queries share its
// job, whether it runs in a prefill chunk or as a decode step.
//
// Scratch is a fixed-size frame on the stack (about 600 KB; pool threads are std::threads
// with the default 8 MB stack): no allocation ever, so the decode step allocates nothing
// (STYLE.md habit 10). Shapes wider than it (K rows or V rows over kMaxRowWidth floats)
// go to the reference kernels.
//
// V must provide: T, kWidth, zero(), set1(f), load(p), store(p, v), load_tail(p, i, n)
// (lanes of p + i below n - i, zero above), store_tail(p, i, n, v), zero_tail(v, i, n),
// add, mul, sub, fmadd(a, b, c) = a * b + c, max(a, b), exp(v), reduce_add(v), reduce_max(v), reduce_block(a)
// (lane k = sum of the lanes of a[k], k < kWidth, by a tree fixed per lane), transpose(a)
// (a[c] becomes lane c of every a[k], in k order) and load_kv_row(type, src, dst, n) (n
// elements of one KV row to float).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/ref/ref.h"
#include "kernels/simd/attention_bf16.h"
#include "kernels/simd/attention_core.h"
#include "kernels/simd/attention_decode.h"

namespace ds::simd {

template <class V>
void attend(const AttnJob& job) {
  alignas(64) float k_tile[kTileFloats];
  alignas(64) float v_tile[kTileFloats];
  alignas(64) float kt_tile[kTileFloats];  // GQA: the K tile transposed
  AttnState st;
  const int kw = job.d_a + job.d_b;
  int64_t n_kv = 0;
  for (int i = 0; i < job.n_m; ++i) n_kv = std::max(n_kv, job.mem[i].n_kv);
  for (int i = 0; i < job.n_m; ++i) {
    st.m[i] = job.mem[i].sink;
    st.l[i] = sink_l0(job.mem[i].sink);
  }
  const int v_ld = (job.d_v + V::kWidth - 1) / V::kWidth * V::kWidth;
  const int tile = job.pairs ? pairs_tile_rows(v_ld) : tile_rows<V>(kw, job.v ? job.d_v : 0);
  const size_t k_bytes = ggml_row_size(job.k->type, kw), v_bytes = job.v ? ggml_row_size(job.v->type, job.d_v) : 0;
  int act[kAttnMaxGroup];
  // Pairs jobs (attention_bf16.h): q packed to bf16 pairs once, K rows transposed straight
  // from the cache, V rows interleaved in pairs.
  alignas(64) float q_pairs[kQPairFloats];
  const int kw2 = kw / 2;
  if constexpr (V::kBf16Dot) {
    if (job.pairs) {
      // The queries usually come from memory (a prefill chunk's q is megabytes): each
      // member's are prefetched 4 members ahead (without: 8% of a GQA prefill's time).
      const int qs = q_pairs_stride<V>(kw);
      const size_t q_bytes = sizeof(float) * static_cast<size_t>(kw);
      for (int i = 0; i < std::min(job.n_m, 4); ++i)
        prefetch_row(reinterpret_cast<const uint8_t*>(job.mem[i].qa), q_bytes);
      for (int i = 0; i < job.n_m; ++i) {
        if (i + 4 < job.n_m) prefetch_row(reinterpret_cast<const uint8_t*>(job.mem[i + 4].qa), q_bytes);
        pack_member_q<V>(job.mem[i], job.d_a, job.d_b, q_pairs + static_cast<size_t>(i) * qs);
      }
    }
  }
  for (int64_t j0 = 0; j0 < n_kv; j0 += tile) {
    const int nt = static_cast<int>(std::min<int64_t>(tile, n_kv - j0));
    const int n_rows = (nt + 7) / 8 * 8;  // score blocks read whole groups of 8 rows
    const int pf_n = static_cast<int>(std::clamp<int64_t>(n_kv - (j0 + tile), 0, tile));
    // The next tile's K rows are prefetched through the first block of scores rather than
    // all at once before the conversion (MLA decode at 16K from memory: ~5% faster); V
    // rows by load_tile.
    const uint8_t* k_pf[kAttnTile];
    if (pf_n > 0) {
      KvRowWalk pf(*job.k, job.k_off, j0 + tile);
      next_rows(pf, pf_n, n_rows, k_pf);
    }
    int n_act = 0;
    for (int i = 0; i < job.n_m; ++i)
      if (job.mem[i].n_kv > j0) act[n_act++] = i;
    if constexpr (V::kBf16Dot) {
      if (job.pairs) {
        load_v_pairs<V>(*job.v, job.v_off, j0, nt, job.d_v, v_ld, v_tile, pf_n);
        const uint8_t* krow[kAttnTile];
        KvRowWalk k_rows(*job.k, job.k_off, j0);
        next_rows(k_rows, nt, nt, krow);
        const int qs = q_pairs_stride<V>(kw);
        const float* q[kAttnMaxGroup];
        float* p[kAttnMaxGroup];
        for (int i = 0; i < n_act; ++i) {
          q[i] = q_pairs + static_cast<size_t>(act[i]) * qs;
          p[i] = st.p[act[i]];
        }
        scores_by_chunks<V, true>([&](int r, int d) { return V::load_bits(krow[r], d, kw2); }, nt, kw2, q, n_act,
                                  job.scale, p, kt_tile, pf_n > 0 ? k_pf : nullptr, pf_n, k_bytes);
        fold_tile_pairs<V>(job, st, act, n_act, j0, nt, v_tile, v_ld);
        continue;
      }
    }
    load_tile<V>(*job.k, job.k_off, j0, nt, kw, k_tile);
    if (job.v) {  // GQA: keys in lanes
      prefetch_rows(*job.v, job.v_off, j0 + tile, pf_n, v_bytes);
      load_tile<V>(*job.v, job.v_off, j0, nt, job.d_v, v_tile);
      const float* q[kAttnMaxGroup];
      float* p[kAttnMaxGroup];
      for (int i = 0; i < n_act; ++i) {
        q[i] = job.mem[act[i]].qa;
        p[i] = st.p[act[i]];
      }
      scores_by_chunks<V>(
          [&](int r, int d) {
            const float* row = k_tile + static_cast<size_t>(r) * kw;
            return d + V::kWidth <= kw ? V::load(row + d) : V::load_tail(row, d, kw);
          },
          nt, kw, q, n_act, job.scale, p, kt_tile, pf_n > 0 ? k_pf : nullptr, pf_n, k_bytes);
    } else {
      // MLA: the row form.
      const int64_t pad_end = static_cast<int64_t>(n_rows) * kw;  // zero rows, without a memset call
      for (int64_t i = static_cast<int64_t>(nt) * kw; i < pad_end; i += V::kWidth)
        V::store_tail(k_tile, i, pad_end, V::zero());
      scores<V>(job, act, n_act, k_tile, kw, n_rows, st.p, pf_n > 0 ? k_pf : nullptr, k_bytes);
    }
    fold_tile<V>(job, st, act, n_act, j0, nt, job.v ? v_tile : k_tile, job.v ? job.d_v : kw);
  }
  for (int im = 0; im < job.n_m; ++im) {
    const typename V::T inv = V::set1(1.0f / st.l[im]);
    const float* a = st.acc + static_cast<size_t>(im) * job.d_v;
    for (int i = 0; i < job.d_v; i += V::kWidth)
      V::store_tail(job.mem[im].out, i, job.d_v, V::mul(V::load_tail(a, i, job.d_v), inv));
  }
}

// Members per job: at most kAttnMaxGroup, their accumulators (d_v wide) within kAccFloats
// and, on the pairs path, their packed q (d_k wide) within kQPairFloats.
template <class V>
int max_members(int d_k, int d_v, bool pairs) {
  const int most = std::min(kAttnMaxGroup, kAccFloats / d_v);
  return pairs ? std::min(most, kQPairFloats / q_pairs_stride<V>(d_k)) : most;
}

template <class V>
void flash_attn(const AttnArgs& a) {
  if (a.d_k > kMaxRowWidth || a.d_v > kMaxRowWidth) return ref::flash_attn(a);
  const int group = a.n_head / a.n_head_kv;
  const bool pairs = bf16_pairs<V>(a.k, a.v, a.d_k);
  const int most = max_members<V>(a.d_k, a.d_v, pairs);
  for (int h0 = a.head_begin; h0 < a.head_end;) {
    // Heads [h0, h1) share KV head h0 / group.
    const int kvh = h0 / group;
    const int h1 = std::min({a.head_end, (kvh + 1) * group, h0 + most});
    const int64_t bq = std::max(1, most / (h1 - h0));
    for (int64_t q0 = 0; q0 < a.n_q; q0 += bq) {
      AttnJob job;
      for (int64_t it = q0; it < std::min(a.n_q, q0 + bq); ++it)
        for (int h = h0; h < h1; ++h)
          job.mem[job.n_m++] = {.qa = a.q + it * a.q_tok_stride + h * a.q_head_stride,
                                .out = a.out + it * a.out_tok_stride + h * a.out_head_stride,
                                .n_kv = static_cast<int64_t>(a.q_pos[it]) + 1,
                                .sink = a.sinks ? a.sinks[h] : -INFINITY};
      job.pairs = pairs;
      job.d_a = a.d_k;
      job.d_v = a.d_v;
      job.scale = a.scale;
      job.k = &a.k;
      job.k_off = static_cast<size_t>(kvh) * a.k.head_offset;
      job.v = &a.v;
      job.v_off = static_cast<size_t>(kvh) * a.v.head_offset;
      if (!try_attend_direct<V>(job)) attend<V>(job);
    }
    h0 = h1;
  }
}

// Over a BF16 cache with bf16 dot products (V::kBf16Dot) MLA takes the pairs path as
// GQA does: K = the whole row [c | k_pe] (q = [q_abs | q_pe] packed to pairs), V = the
// same rows' first kv_lora elements (job.v set to the same view).
template <class V>
void mla_attn(const MlaArgs& a) {
  const int kw = a.kv_lora + a.n_rope;
  if (kw > kMaxRowWidth) return ref::mla_attn(a);
  const bool pairs = bf16_pairs<V>(a.kv, a.kv, kw);
  const int max_h = max_members<V>(kw, a.kv_lora, pairs);  // a job: heads [h0, h1) of some queries
  for (int h0 = a.head_begin; h0 < a.head_end; h0 += max_h) {
    const int h1 = std::min(a.head_end, h0 + max_h);
    // The queries in jobs of at most bq_max, as even as they divide (32 queries of 16 heads
    // at 6 per job: 6 + 6 + 5 + 5 + 5 + 5, not 6 x 5 + 2).
    const int64_t bq_max = std::max(1, max_h / (h1 - h0)), n_jobs = (a.n_q + bq_max - 1) / bq_max;
    for (int64_t jb = 0; jb < n_jobs; ++jb) {
      AttnJob job;
      for (int64_t it = a.n_q * jb / n_jobs; it < a.n_q * (jb + 1) / n_jobs; ++it)
        for (int h = h0; h < h1; ++h)
          job.mem[job.n_m++] = {.qa = a.q_abs + it * a.q_tok_stride + h * a.q_head_stride,
                                .qb = a.q_pe + it * a.q_tok_stride + h * a.q_head_stride,
                                .out = a.out + it * a.out_tok_stride + h * a.out_head_stride,
                                .n_kv = static_cast<int64_t>(a.q_pos[it]) + 1};
      job.d_a = a.kv_lora;
      job.d_b = a.n_rope;
      job.d_v = a.kv_lora;
      job.scale = a.scale;
      job.k = &a.kv;
      job.pairs = pairs;
      if (pairs) job.v = &a.kv;
      if (!try_attend_direct<V>(job)) attend<V>(job);
    }
  }
}

}  // namespace ds::simd
