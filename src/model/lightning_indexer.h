// Lightning indexer: the top-k key selection of DeepSeek's sparse attention
// (../shared/SPEC-deepseek32-deepseek4.md 1.1, 1.2). For each query t of a batch,
//   score(t, j) = sum_h max(0, q_{t,h} . k_j) * w_{t,h}      over its visible keys j < n_keys[t]
// and the selection is the min(top_k, n_keys[t]) keys of largest score (a set: ties and
// order are unspecified, as in the reference).
//
// The keys live in the paged KV cache, one f32 vector of `dim` floats per key, shared by all
// heads (MQA; f32, or bf16 where the architecture stores them so). Where a key sits is described per architecture by
// IndexerKeyLayout, so the same selection serves V3.2 (one key per token, next to its MLA latent) and V4's
// compressed-sparse layers (one key per 4 tokens). Scores are computed in f32 (as the
// reference does; queries rounded to the keys' type first) by the kernel table's
// indexer_scores, which reads each key in place from the cache blocks once for all heads
// (each query packed once, kernels.h [INDEXER_QUERY_LAYOUT]), in chunks of 256 keys that a
// block of 32 queries shares; the selection streams the scores through a buffer of 2k
// candidates (compacted to the best k with nth_element when full), so its memory is O(k)
// per query whatever the context length. A query whose visible keys number at most top_k
// selects them all without scoring (the reference's result: every visible row wins).
// Decode of one sequence splits the keys over the threads (one candidate buffer per part,
// merged at the end); prefill splits the queries.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/forward.h"

namespace ds {

// Key j of a sequence: `dim` elements of `type` (F32, or BF16 scored with bf16 dot products)
// at blocks[j / keys_per_block] + offset + (j % keys_per_block) * key_stride, with blocks the
// sequence's KV block table.
struct IndexerKeyLayout {
  GgmlType type = GgmlType::F32;
  int keys_per_block = 0;
  size_t key_stride = 0;  // bytes between consecutive keys of a block
  size_t offset = 0;      // bytes from a block's base to its first key
};

struct IndexerArgs {
  int n_head = 0;   // H_I
  int64_t dim = 0;  // D_I
  int top_k = 0;
  const float* q = nullptr;         // [n_tok][n_head][dim], batch rows (f32)
  const float* w = nullptr;         // [n_tok][n_head], per-head weights (the 1/sqrt(D_I H_I) folded in)
  const int32_t* n_keys = nullptr;  // [n_tok]: batch row t sees keys [0, n_keys[t]) of its sequence
  IndexerKeyLayout keys;
};

class LightningIndexer {
 public:
  // Scratch arena bytes one select() over n_tok batch rows may use.
  static size_t scratch_bytes(int64_t n_tok, int n_head, int64_t dim, int top_k);

  // For every batch row t: sel[t * top_k + i], i < n_sel[t] = min(top_k, n_keys[t]), the
  // selected key indices in ascending order. Threads from ctx.pool; memory from ctx.arena.
  static void select(ForwardCtx& ctx, const IndexerArgs& a, int32_t* sel, int32_t* n_sel);

  // The scores of batch row t against all its visible keys, scores[0 .. n_keys[t]), computed
  // as select() computes them (single-threaded; for traces and tests).
  static void scores(ForwardCtx& ctx, const IndexerArgs& a, int64_t t, float* scores);
};

}  // namespace ds
