// Lightning indexer scoring and top-k selection; see lightning_indexer.h.
#include "model/lightning_indexer.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ds {

namespace {

struct Cand {
  float score;
  int32_t key;
};

// Candidates of one (query, key part): every key scoring above thr is appended; at 2k
// entries the buffer keeps its best k and thr becomes the k-th score, so what is dropped
// can never be among the final top k.
struct CandBuf {
  Cand* c = nullptr;
  int32_t n = 0;
  float thr = -INFINITY;
};

void keep_best(CandBuf& b, int k) {
  if (b.n <= k) return;
  // Equal scores keep the lower key: the set does not depend on how keys were split.
  std::nth_element(b.c, b.c + (k - 1), b.c + b.n, [](const Cand& x, const Cand& y) {
    return x.score > y.score || (x.score == y.score && x.key < y.key);
  });
  b.n = k;
  b.thr = b.c[k - 1].score;
}

inline void push(CandBuf& b, int k, float score, int32_t key) {
  if (!(score > b.thr)) return;
  b.c[b.n++] = Cand{score, key};
  if (b.n == 2 * k) keep_best(b, k);
}

// The queries [q0, q0 + n) of one sequence (batch rows t0 + q0 ...) against keys [k0, k1).
struct Item {
  int seq;
  int64_t q0, n;
  int64_t k0, k1;
  int part;
};

// The keys as the kernel table's indexer_scores reads them.
KvView key_view(const IndexerKeyLayout& L, const uint8_t* const* blocks) {
  return {.type = L.type,
          .blocks = blocks,
          .block_size = L.keys_per_block,
          .row_stride = L.key_stride,
          .elem_offset = L.offset};
}

// Parts the keys of a query block are split into: enough work items for every thread
// when the batch has few query blocks (decode), and at most kMaxSplitRows candidate
// buffers beyond one per batch row.
constexpr int64_t kMaxSplitRows = 64;
constexpr int64_t kQueryBlock = 32;
// Keys scored per kernel call: 128 KiB of f32 keys (256 x 128), which stay in L2 while the
// query block's queries take their turns.
constexpr int64_t kChunk = 256;

}  // namespace

size_t LightningIndexer::scratch_bytes(int64_t n_tok, int n_head, int64_t dim, int top_k) {
  const size_t rows = static_cast<size_t>(std::max(n_tok, kMaxSplitRows));
  // Every buffer has at most max(n_tok, kMaxSplitRows) rows (n_tok * P is bounded so), and
  // there are at most as many work items as buffer rows. F32 keys pack the largest queries.
  return rows * (2 * static_cast<size_t>(top_k) * sizeof(Cand) + sizeof(CandBuf)) +          // candidates
         rows * (kChunk * sizeof(float) + sizeof(Item)) + 8 * 64 +                           // scores, items
         static_cast<size_t>(n_tok) * indexer_query_bytes(GgmlType::F32, n_head, dim) + 64;  // packed queries
}

void LightningIndexer::select(ForwardCtx& ctx, const IndexerArgs& a, int32_t* sel, int32_t* n_sel) {
  const Batch& b = ctx.batch;
  const int k = a.top_k, H = a.n_head;
  Arena& ar = ctx.arena;

  // Rows that see at most k keys select them all; the others need scores.
  int64_t n_blocks = 0;
  for (int64_t t = 0; t < b.n_tok; ++t) {
    const int32_t nk = a.n_keys[t];
    n_sel[t] = std::min(nk, k);
    if (nk <= k)
      for (int32_t j = 0; j < nk; ++j) sel[t * k + j] = j;
  }
  for (int s = 0; s < b.n_seqs; ++s) {
    const SeqSlice& sq = b.seqs[s];
    for (int64_t q0 = 0; q0 < sq.n; q0 += kQueryBlock) {
      bool sparse = false;
      for (int64_t i = q0; i < std::min(sq.n, q0 + kQueryBlock); ++i) sparse |= a.n_keys[sq.t0 + i] > k;
      n_blocks += sparse;
    }
  }
  if (n_blocks == 0) return;

  const int64_t nth = ctx.pool.n_threads();
  const int64_t P =
      std::clamp<int64_t>((nth + n_blocks - 1) / n_blocks, 1, std::max<int64_t>(1, kMaxSplitRows / b.n_tok));
  Item* items = ar.alloc<Item>(n_blocks * P);
  int64_t n_items = 0;  // n_items <= n_tok * P <= max(n_tok, kMaxSplitRows)
  for (int s = 0; s < b.n_seqs; ++s) {
    const SeqSlice& sq = b.seqs[s];
    for (int64_t q0 = 0; q0 < sq.n; q0 += kQueryBlock) {
      const int64_t n = std::min(kQueryBlock, sq.n - q0);
      int64_t n_keys = 0;
      for (int64_t i = q0; i < q0 + n; ++i) {
        const int32_t nk = a.n_keys[sq.t0 + i];
        if (nk > k) n_keys = std::max<int64_t>(n_keys, nk);
      }
      if (n_keys == 0) continue;
      for (int64_t p = 0; p < P; ++p) {
        items[n_items++] = Item{s, q0, n, n_keys * p / P, n_keys * (p + 1) / P, static_cast<int>(p)};
      }
    }
  }

  CandBuf* bufs = ar.alloc<CandBuf>(b.n_tok * P);
  Cand* cands = ar.alloc<Cand>(b.n_tok * P * 2 * k);
  for (int64_t i = 0; i < b.n_tok * P; ++i) bufs[i] = CandBuf{cands + i * 2 * k, 0, -INFINITY};
  // Every sparse row's query and weights packed once for the kernel [INDEXER_QUERY_LAYOUT].
  const size_t q_bytes = indexer_query_bytes(a.keys.type, H, a.dim);
  uint8_t* qpack = ar.alloc_bytes(q_bytes * static_cast<size_t>(b.n_tok));
  ctx.parallel_for(b.n_tok, [&](int64_t r0, int64_t r1) {
    for (int64_t t = r0; t < r1; ++t)
      if (a.n_keys[t] > k)
        indexer_pack_query(a.keys.type, a.q + t * H * a.dim, a.w + t * H, H, a.dim, qpack + t * q_bytes);
  });
  float* chunk_scores = ar.alloc<float>(n_items * kChunk);

  ctx.pool.parallel_for(n_items, 1, [&](int64_t i0, int64_t i1, int) {
    for (int64_t ii = i0; ii < i1; ++ii) {
      const Item& it = items[ii];
      const SeqSlice& sq = b.seqs[it.seq];
      const int64_t t0 = sq.t0 + it.q0;
      float* sc = chunk_scores + ii * kChunk;
      const KvView keys = key_view(a.keys, sq.kv_blocks);
      // Key chunks outside, queries inside: a chunk stays in cache for the block's queries.
      for (int64_t c0 = it.k0; c0 < it.k1; c0 += kChunk) {
        for (int64_t i = 0; i < it.n; ++i) {
          const int32_t nk = a.n_keys[t0 + i];
          const int64_t c1 = std::min<int64_t>({c0 + kChunk, it.k1, nk});
          if (nk <= k || c1 <= c0) continue;
          ctx.kt.indexer_scores({.q = qpack + (t0 + i) * q_bytes,
                                 .n_head = H,
                                 .dim = a.dim,
                                 .keys = keys,
                                 .k0 = c0,
                                 .k1 = c1,
                                 .out = sc});
          CandBuf& buf = bufs[(t0 + i) * P + it.part];
          for (int64_t j = c0; j < c1; ++j) push(buf, k, sc[j - c0], static_cast<int32_t>(j));
        }
      }
    }
  });

  // Merge the parts of each sparse row, keep the best k, hand them out in key order.
  ctx.parallel_for(b.n_tok, [&](int64_t r0, int64_t r1) {
    for (int64_t t = r0; t < r1; ++t) {
      if (a.n_keys[t] <= k) continue;
      CandBuf& dst = bufs[t * P];
      for (int64_t p = 1; p < P; ++p) {
        const CandBuf& src = bufs[t * P + p];
        for (int32_t i = 0; i < src.n; ++i) push(dst, k, src.c[i].score, src.c[i].key);
      }
      keep_best(dst, k);
      int32_t* out = sel + t * k;
      for (int32_t i = 0; i < dst.n; ++i) out[i] = dst.c[i].key;
      std::sort(out, out + dst.n);
      n_sel[t] = dst.n;
    }
  });
}

void LightningIndexer::scores(ForwardCtx& ctx, const IndexerArgs& a, int64_t t, float* scores) {
  const SeqSlice& sq = ctx.seq_of(t);
  const int H = a.n_head;
  std::vector<uint8_t> q(indexer_query_bytes(a.keys.type, H, a.dim));
  indexer_pack_query(a.keys.type, a.q + t * H * a.dim, a.w + t * H, H, a.dim, q.data());
  ctx.kt.indexer_scores({.q = q.data(),
                         .n_head = H,
                         .dim = a.dim,
                         .keys = key_view(a.keys, sq.kv_blocks),
                         .k0 = 0,
                         .k1 = a.n_keys[t],
                         .out = scores});
}

}  // namespace ds
