// deepseek4 CSA indexer (../shared/SPEC-deepseek32-deepseek4.md 3.6 with 1.1 and 1.2):
// score(t, j) = sum_h relu(q_h . k_j) * w_h over the visible compressed indexer rows j of
// a ratio-4 block, top-k kept in a bounded min-heap, so a query needs O(k) memory whatever
// the context and the attention then reads only the k chosen compressed rows. The rows of
// one paged KV block lie at a fixed stride, so each such run is scored by one f32 matmul
// (keys as weight rows, the H_I query heads as activation rows).
//
// The Hadamard rotation of SPEC 1.3 is not applied: queries and keys stay f32, and the
// rotation is orthonormal on both sides, so the scores change only at float rounding
// (SPEC 1.3: "an engine that keeps indexer keys in f32 may skip the rotation").
// Heads are accumulated in order h = 0..H_I-1 in f32, as the reference's fused op.
#include <algorithm>

#include "model/deepseek4.h"

namespace ds::dsv4 {

void indexer_scores(const KernelTable& kt, const IndexerQuery& iq, const KeyRun& run, int n, float* dots,
                    float* scores) {
  // dots[h][i] = q_h . key_i: the run's keys as the rows of an f32 matrix, the heads as
  // activation rows.
  kt.matmul({.wtype = GgmlType::F32,
             .w = run.first,
             .w_row_stride = run.stride,
             .n_in = iq.dim,
             .row_begin = 0,
             .row_end = n,
             .act = iq.q,
             .act_row_stride = static_cast<size_t>(iq.dim) * sizeof(float),
             .n_tok = iq.n_head,
             .out = dots,
             .out_stride = n});
  for (int i = 0; i < n; ++i) scores[i] = 0.0f;
  for (int h = 0; h < iq.n_head; ++h) {
    const float w = iq.w[h];
    for (int i = 0; i < n; ++i) scores[i] += std::max(dots[h * n + i], 0.0f) * w;
  }
}

// Min-heap on score of at most k rows (the k-th best at heap[0]); returns the new size.
int topk_push(ScoredRow* heap, int n, int k, ScoredRow r) {
  auto greater = [](const ScoredRow& a, const ScoredRow& b) { return a.score > b.score; };
  if (n < k) {
    heap[n++] = r;
    std::push_heap(heap, heap + n, greater);
    return n;
  }
  if (r.score <= heap[0].score) return n;  // ties keep the earlier row (the set is what counts)
  std::pop_heap(heap, heap + n, greater);
  heap[n - 1] = r;
  std::push_heap(heap, heap + n, greater);
  return n;
}

}  // namespace ds::dsv4
