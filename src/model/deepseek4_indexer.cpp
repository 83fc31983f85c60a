// deepseek4 CSA indexer (../shared/SPEC-deepseek32-deepseek4.md 3.6 with 1.1 and 1.2):
// score(t, j) = sum_h relu(q_h . k_j) * w_h over the visible compressed indexer rows j of
// a ratio-4 block, top-k kept in a bounded min-heap, so a query needs O(k) memory whatever
// the context and the attention then reads only the k chosen compressed rows.
//
// The Hadamard rotation of SPEC 1.3 is not applied: queries and keys stay f32, and the
// rotation is orthonormal on both sides, so the scores change only at float rounding
// (SPEC 1.3: "an engine that keeps indexer keys in f32 may skip the rotation").
// Heads are accumulated in order h = 0..H_I-1 in f32, as the reference's fused op.
#include <algorithm>

#include "model/deepseek4.h"

namespace ds::dsv4 {

float indexer_score(const KernelTable& kt, const IndexerQuery& iq, const float* key) {
  float score = 0.0f;
  for (int h = 0; h < iq.n_head; ++h) {
    const float d = kt.vec_dot(GgmlType::F32, iq.dim, key, iq.q + h * iq.dim);
    score += std::max(d, 0.0f) * iq.w[h];
  }
  return score;
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
