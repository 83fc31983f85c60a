// Pieces of the deepseek4 (DeepSeek-V4) forward pass shared by its files
// (../shared/SPEC-deepseek32-deepseek4.md section 3): the KV row layout, the
// hyper-connection mixes, the KV compressor, the CSA indexer and the V4 MoE.
// docs/arch-deepseek4.md describes the design.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "model/forward.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace ds::dsv4 {

// [DSV4_CACHE] One token's row of one block in the paged cache (byte offsets from the row
// start). Every piece is a function of the token positions only, so a prefix of full KV
// blocks restores the whole compressed state exactly:
//   raw       the token's kv vector (cache type, D), read by the sliding window;
//   comp      compressed row b, stored in the row of the position that completes block b
//             (r*b + r - 1), cache type, D (ratio != 0);
//   state     the compressor inputs of this token, f32: v (c*D), then s incl. APE (c*D);
//   idx_comp  the indexer's compressed row (f32, D_I; ratio 4), same slot rule as comp;
//   idx_state the indexer compressor inputs (f32: v 2*D_I, s 2*D_I; ratio 4).
struct RowLayout {
  size_t raw = 0;
  size_t comp = 0;
  size_t state = 0;
  size_t idx_comp = 0;
  size_t idx_state = 0;
  size_t end = 0;
};
RowLayout row_layout(const HParams& hp, int il, GgmlType kv_type);
// Compressor width multiplier c: 2 for the overlapping ratio-4 windows, 1 for ratio 128.
inline int64_t comp_mult(int ratio) {
  return ratio == 4 ? 2 : 1;
}

// RoPE of block il's ratio (SPEC 3.4): base rope without YaRN for ratio 0; the compress base
// with the file's YaRN otherwise (also the indexer's). Interleaved, on the last n_rot dims.
RopeParams rope_params(const HParams& hp, int ratio);

// Hyper-connection pre-mix of one sub-layer (SPEC 3.3) for T tokens of state X [T][hc][E]:
// y [T][E] = sum_s pre[s] X[s]; post [T][hc]; comb [T][hc][hc] (C[d][s], after Sinkhorn).
void hc_pre(ForwardCtx& ctx, const HParams& hp, const Mat& fn, const Vec& base, const Vec& scale, const float* X,
            int64_t T, float* y, float* post, float* comb);
// A sub-layer's entry: hc_pre into arena rows, then y rms-normed with `norm` (the
// sub-layer's input); post and comb are what its hc_post takes.
struct HcEntry {
  float* y;     // [T][E]
  float* post;  // [T][hc]
  float* comb;  // [T][hc][hc]
};
HcEntry hc_enter(ForwardCtx& ctx, const HParams& hp, const Mat& fn, const Vec& base, const Vec& scale, const Vec& norm,
                 const float* X, int64_t T);
// X' [T][hc][E]: X'[d] = post[d] * o + sum_s C[d][s] X[s].
void hc_post(ForwardCtx& ctx, const HParams& hp, const float* X, const float* o, const float* post, const float* comb,
             int64_t T, float* out);
// The output head's pre-mix: y [n][E] for the state rows X + rows[i] * hc * E.
void hc_head(ForwardCtx& ctx, const HParams& hp, const Weights& w, const float* X, const int64_t* rows, int64_t n,
             float* y);
// Sinkhorn normalization of one token's comb matrix c [n][n] (c[d * n + s]) in place
// (SPEC 3.3 and care point 10).
void sinkhorn(float* c, int n, int iters, float eps);

// Compressed row of `ratio` over the positions' compressor states (SPEC 3.5): v(p, i) and
// s(p, i) give channel i (< c*width) of position p's state. out [width] before the norm.
// Scratch: 2 * width floats.
struct CompressorInputs {
  const float* const* v;  // [n_pos] state rows (v part), null for the b = 0 padding
  const float* const* s;  // [n_pos] (s part)
  int n_pos;              // 8 for ratio 4 (previous block, then this one), 128 for ratio 128
  int ratio;
  int64_t width;  // D or D_I
};
void compress(const CompressorInputs& in, float* out, float* scratch);

// CSA indexer (SPEC 3.6, 1.1, 1.2): the top-k of the n_vis visible indexer rows for one
// query. q [H_I][D_I] (roped), w [H_I] (already / sqrt(D_I * H_I)). run(j, &rows) gives the
// keys of rows j, j+1, ... that lie at a common stride (f32, D_I wide: one paged KV block's
// rows) and returns how many. Writes the chosen row ids to sel and returns how many
// (min(k, n_vis)). Scratch: heap of k rows; dots of H_I * max_run floats, scores of max_run.
struct IndexerQuery {
  const float* q;
  const float* w;
  int n_head;
  int64_t dim;
};
struct ScoredRow {
  float score;
  int32_t id;
};
struct KeyRun {
  const uint8_t* first = nullptr;  // key of the run's first row
  size_t stride = 0;               // bytes between consecutive rows' keys
};
struct IndexerScratch {
  ScoredRow* heap;
  float* dots;
  float* scores;
};
// scores[i] = sum_h relu(q_h . key_i) * w_h for the n rows of a run (one matmul).
void indexer_scores(const KernelTable& kt, const IndexerQuery& iq, const KeyRun& run, int n, float* dots,
                    float* scores);
int topk_push(ScoredRow* heap, int n, int k, ScoredRow r);

template <class RunFn>
int csa_select(const KernelTable& kt, const IndexerQuery& iq, int64_t n_vis, int k, RunFn&& run, int32_t* sel,
               const IndexerScratch& s) {
  if (n_vis <= k) {  // every visible row: with fewer rows than k the layer is dense (SPEC 1.2)
    for (int64_t j = 0; j < n_vis; ++j) sel[j] = static_cast<int32_t>(j);
    return static_cast<int>(n_vis);
  }
  int n = 0;
  for (int64_t j = 0; j < n_vis;) {
    KeyRun r;
    const int m = static_cast<int>(std::min<int64_t>(run(j, &r), n_vis - j));
    indexer_scores(kt, iq, r, m, s.dots, s.scores);
    for (int i = 0; i < m; ++i) n = topk_push(s.heap, n, k, ScoredRow{s.scores[i], static_cast<int32_t>(j + i)});
    j += m;
  }
  for (int i = 0; i < n; ++i) sel[i] = s.heap[i].id;
  return n;
}

// The V4 MoE sub-layer on normalized rows xn [T][E] (SPEC 3.7): sqrt-softplus router,
// hash routing in the first blocks, clamped SwiGLU experts, shared expert. Traces "experts".
void moe_ffn(ForwardCtx& ctx, const HParams& hp, const LayerWeights& lw, int il, const float* xn, float* out);
size_t moe_scratch(const HParams& hp, int64_t T);

}  // namespace ds::dsv4
