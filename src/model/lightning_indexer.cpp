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

// The queries [q0, q0 + n) of one sequence (batch rows t0 + q0 ...) against keys [k0, k1);
// its scratch rows start at query row `row` of the dot and score buffers.
struct Item {
  int seq;
  int64_t q0, n;
  int64_t k0, k1;
  int part;
  int64_t row;
};

// Scores of n queries (their q rows at q, weights at w) against the keys [a, b) of one
// block tile: dots[i][h][j] by the F32 matmul, then out[i * kTile + j] = sum_h relu(dot) * w_h
// in head order (the reference's order, SPEC 1.1).
// q: the queries' rows in vec_dot_type(key type), q_stride bytes apart.
void score_tile(const KernelTable& kt, const IndexerArgs& a, const uint8_t* const* blocks, const uint8_t* q,
                size_t q_stride, const float* w, int64_t n, int64_t k0, int nt, float* dots, float* out) {
  constexpr int T = LightningIndexer::kTile;
  const IndexerKeyLayout& L = a.keys;
  const uint8_t* key = blocks[k0 / L.keys_per_block] + L.offset + static_cast<size_t>(k0 % L.keys_per_block) * L.key_stride;
  const int H = a.n_head;
  kt.matmul({.wtype = L.type,
             .w = key,
             .w_row_stride = L.key_stride,
             .n_in = a.dim,
             .row_begin = 0,
             .row_end = nt,
             .act = q,
             .act_row_stride = q_stride,
             .n_tok = n * H,
             .out = dots,
             .out_stride = T});
  for (int64_t i = 0; i < n; ++i) {
    float acc[T] = {};
    for (int h = 0; h < H; ++h) {
      const float wh = w[i * H + h];
      const float* d = dots + (i * H + h) * T;
      for (int j = 0; j < T; ++j) acc[j] += std::max(d[j], 0.0f) * wh;
    }
    std::copy_n(acc, nt, out + i * T);
  }
}

// Calls f(k0, nt) for the tiles of keys [k0, k1): cut at cache-block edges and every kTile keys.
template <class F>
void for_each_tile(const IndexerKeyLayout& L, int64_t k0, int64_t k1, F&& f) {
  for (int64_t j = k0; j < k1;) {
    const int64_t block_end = (j / L.keys_per_block + 1) * L.keys_per_block;
    const int64_t e = std::min({k1, block_end, j + LightningIndexer::kTile});
    f(j, static_cast<int>(e - j));
    j = e;
  }
}

// Parts the keys of a query block are split into: enough work items for every thread
// when the batch has few query blocks (decode), and at most kMaxSplitRows candidate
// buffers beyond one per batch row.
constexpr int64_t kMaxSplitRows = 64;
constexpr int64_t kQueryBlock = 32;

// The query rows as the keys' dot product consumes them: the f32 rows themselves, or
// each head converted once (bf16 keys take bf16 queries, SPEC.md numerics). dst: room for
// n_rows rows of the converted type.
const uint8_t* query_rows(const KernelTable& kt, const IndexerArgs& a, int64_t n_rows, uint8_t* dst, size_t* stride) {
  const GgmlType at = vec_dot_type(a.keys.type);
  if (at == GgmlType::F32) {
    *stride = static_cast<size_t>(a.dim) * sizeof(float);
    return reinterpret_cast<const uint8_t*>(a.q);
  }
  *stride = ggml_row_size(at, a.dim);
  for (int64_t r = 0; r < n_rows; ++r) kt.quantize_act(at, a.q + r * a.dim, dst + static_cast<size_t>(r) * *stride, a.dim);
  return dst;
}

}  // namespace

size_t LightningIndexer::scratch_bytes(int64_t n_tok, int n_head, int64_t dim, int top_k) {
  const size_t rows = static_cast<size_t>(std::max(n_tok, kMaxSplitRows));
  // Every buffer has at most max(n_tok, kMaxSplitRows) rows (n_tok * P is bounded so).
  return rows * (2 * static_cast<size_t>(top_k) * sizeof(Cand) + sizeof(CandBuf)) +  // candidates
         rows * static_cast<size_t>(n_head + 1) * kTile * sizeof(float) +            // dots, scores
         rows * sizeof(Item) + 8 * 64 +
         static_cast<size_t>(n_tok) * static_cast<size_t>(n_head) * static_cast<size_t>(dim) * sizeof(float);  // queries
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
  const int64_t P = std::clamp<int64_t>((nth + n_blocks - 1) / n_blocks, 1, std::max<int64_t>(1, kMaxSplitRows / b.n_tok));
  Item* items = ar.alloc<Item>(n_blocks * P);
  int64_t n_items = 0, n_rows = 0;  // n_rows <= n_tok * P <= max(n_tok, kMaxSplitRows)
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
        items[n_items++] = Item{s, q0, n, n_keys * p / P, n_keys * (p + 1) / P, static_cast<int>(p), n_rows};
        n_rows += n;
      }
    }
  }

  CandBuf* bufs = ar.alloc<CandBuf>(b.n_tok * P);
  Cand* cands = ar.alloc<Cand>(b.n_tok * P * 2 * k);
  for (int64_t i = 0; i < b.n_tok * P; ++i) bufs[i] = CandBuf{cands + i * 2 * k, 0, -INFINITY};
  // Queries converted for the keys' dot product (bf16 keys: bf16 queries), once per row and head.
  const GgmlType at = vec_dot_type(a.keys.type);
  const size_t q_stride = ggml_row_size(at, a.dim);
  const uint8_t* qrows = reinterpret_cast<const uint8_t*>(a.q);
  if (at != GgmlType::F32) {
    uint8_t* qbuf = ar.alloc_bytes(q_stride * static_cast<size_t>(b.n_tok * H));
    ctx.parallel_for(b.n_tok * H, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) ctx.kt.quantize_act(at, a.q + r * a.dim, qbuf + static_cast<size_t>(r) * q_stride, a.dim);
    });
    qrows = qbuf;
  }
  float* dots = ar.alloc<float>(n_rows * H * kTile);
  float* tile_scores = ar.alloc<float>(n_rows * kTile);

  ctx.pool.parallel_for(n_items, 1, [&](int64_t i0, int64_t i1, int) {
    for (int64_t ii = i0; ii < i1; ++ii) {
      const Item& it = items[ii];
      const SeqSlice& sq = b.seqs[it.seq];
      const int64_t t0 = sq.t0 + it.q0;
      float* d = dots + it.row * H * kTile;
      float* sc = tile_scores + it.row * kTile;
      for_each_tile(a.keys, it.k0, it.k1, [&](int64_t j0, int nt) {
        score_tile(ctx.kt, a, sq.kv_blocks, qrows + static_cast<size_t>(t0 * H) * q_stride, q_stride, a.w + t0 * H,
                   it.n, j0, nt, d, sc);
        for (int64_t i = 0; i < it.n; ++i) {
          const int32_t nk = a.n_keys[t0 + i];
          if (nk <= k) continue;
          CandBuf& buf = bufs[(t0 + i) * P + it.part];
          const int64_t end = std::min<int64_t>(nt, nk - j0);
          for (int64_t j = 0; j < end; ++j) push(buf, k, sc[i * kTile + j], static_cast<int32_t>(j0 + j));
        }
      });
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
  std::vector<float> dots(static_cast<size_t>(H) * kTile), sc(kTile);
  IndexerArgs one = a;
  one.q = a.q + t * H * a.dim;
  std::vector<uint8_t> qbuf(static_cast<size_t>(H * a.dim) * sizeof(float));
  size_t q_stride = 0;
  const uint8_t* q = query_rows(ctx.kt, one, H, qbuf.data(), &q_stride);
  for_each_tile(a.keys, 0, a.n_keys[t], [&](int64_t j0, int nt) {
    score_tile(ctx.kt, a, sq.kv_blocks, q, q_stride, a.w + t * H, 1, j0, nt, dots.data(), sc.data());
    std::copy_n(sc.data(), nt, scores + j0);
  });
}

}  // namespace ds
