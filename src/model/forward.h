// What one forward step sees: the flat batch (tokens of many sequences, each with its own
// positions and paged KV block table), the kernel table, the thread pool and a scratch
// arena sized at load. Model code (llama.cpp, qwen2.cpp, deepseek2.cpp) is written against
// ForwardCtx and never allocates: every temporary comes from the arena, which is reset
// after each sub-layer.
//
// KV layout [KV_LAYOUT]: a BlockPool block holds block_size tokens of every layer,
// ordered [layer][token in block][row]; a row is one token's K|V for that layer (dense
// models: K of all kv heads, then V) or its MLA latent [c | k_pe] (deepseek2; deepseek32
// adds its f32 indexer key after the latent, deepseek32.cpp). Rows are stored in the cache
// type (f32, f16, bf16, q8_0) by kernels' store_kv.
#pragma once
#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>

#include "kernels/kernels.h"
#include "model/weights.h"
#include "runtime/numa.h"
#include "runtime/thread_pool.h"

namespace ds {

// One sequence's rows [t0, t0 + n) of the flat batch and its block table.
struct SeqSlice {
  int64_t t0 = 0;
  int64_t n = 0;
  const uint8_t* const* kv_blocks = nullptr;  // block base pointers, in table order
  int n_blocks = 0;
};

struct Batch {
  int64_t n_tok = 0;
  const int32_t* tokens = nullptr;  // [n_tok]
  const int32_t* pos = nullptr;     // [n_tok] position of each row in its sequence
  const SeqSlice* seqs = nullptr;   // [n_seqs], rows of a sequence are contiguous
  int n_seqs = 0;
  const int64_t* out_rows = nullptr;  // [n_out] batch rows whose logits are wanted
  int64_t n_out = 0;
};

struct KvLayout {
  GgmlType type = GgmlType::F32;
  int block_size = 16;
  // layer_rows[il]: one token's row of layer il (Model::kv_layer_row_bytes; they differ per
  // layer in deepseek4); layer_before[il]: the rows of the layers before it, bytes per token.
  // A block holds layer 0's block_size rows, then layer 1's, ...
  const size_t* layer_rows = nullptr;
  const size_t* layer_before = nullptr;
  size_t row_bytes_of(int il) const { return layer_rows[il]; }
  // Byte offset of (layer il, row r of a block) from the block base [KV_LAYOUT].
  size_t offset(int il, int r) const {
    return layer_before[il] * static_cast<size_t>(block_size) + static_cast<size_t>(r) * layer_rows[il];
  }
};

// Per-block tensors for tracing (ds-cli eval --dump-layers, the teacher-forced tests):
// name is "in", "mid", "out" (float rows of n_cols) or "experts" (int32 rows).
using TraceFn = std::function<void(const char* name, int il, const void* data, int64_t n_rows, int64_t n_cols)>;

// Bump allocator over one buffer allocated at load (NUMA-bound per mode, numa.h).
// Exceeding it is a programmer error (the size formula in Model::scratch_bytes is wrong),
// so it aborts with a message.
class Arena {
 public:
  static Result<std::unique_ptr<Arena>> create(size_t bytes, NumaMode mode);
  template <class T>
  T* alloc(int64_t n) {
    const size_t bytes = (static_cast<size_t>(n) * sizeof(T) + 63) & ~size_t{63};
    if (used_ + bytes > cap_) overflow(bytes);
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += bytes;
    if (used_ > high_) high_ = used_;
    return p;
  }
  uint8_t* alloc_bytes(size_t n) { return alloc<uint8_t>(static_cast<int64_t>(n)); }
  size_t mark() const { return used_; }
  void reset(size_t mark) { used_ = mark; }
  size_t capacity() const { return cap_; }
  size_t high_water() const { return high_; }

 private:
  Arena() = default;
  [[noreturn]] void overflow(size_t bytes) const;
  NumaBuffer buf_;
  uint8_t* base_ = nullptr;  // buf_ aligned to 64 bytes
  size_t cap_ = 0;
  size_t used_ = 0;
  size_t high_ = 0;
};

// Latency attribution (Engine::profile, ds-cli bench --profile): exclusive time per stage,
// the stages of kProfileStages in include/ds/engine.h. A ProfScope charges the time since
// the last switch to the enclosing stage and runs its own until it ends, so nested scopes
// never count twice. Costs two clock reads per scope, and nothing when profiling is off.
enum class Stage {
  kNormsRope,
  kAttention,
  kRouter,
  kFfnDense,
  kFfnExperts,
  kOutputHead,
  kQuantizeAct,
  kSync,
  kOther,
  kCount
};

// kSync: the time thread 0 waited at the end of parallel regions for the other threads
// (ThreadPool::set_wait_counter counts it into wait_ns), moved out of the stage it fell in.
struct Profile {
  double seconds[static_cast<int>(Stage::kCount)] = {};
  Stage current = Stage::kOther;
  std::chrono::steady_clock::time_point since;
  int64_t wait_ns = 0;    // the pool's running count of the caller's waits
  int64_t wait_seen = 0;  // wait_ns at the last switch
  void switch_to(Stage s) {
    const auto now = std::chrono::steady_clock::now();
    const double waited = static_cast<double>(wait_ns - wait_seen) * 1e-9;
    wait_seen = wait_ns;
    seconds[static_cast<int>(current)] += std::chrono::duration<double>(now - since).count() - waited;
    seconds[static_cast<int>(Stage::kSync)] += waited;
    current = s;
    since = now;
  }
};

class ProfScope {
 public:
  ProfScope(Profile* p, Stage s) : p_(p) {
    if (p_) {
      prev_ = p_->current;
      p_->switch_to(s);
    }
  }
  ~ProfScope() {
    if (p_) p_->switch_to(prev_);
  }
  ProfScope(const ProfScope&) = delete;
  ProfScope& operator=(const ProfScope&) = delete;

 private:
  Profile* p_;
  Stage prev_ = Stage::kOther;
};

// One matrix product of a batch of independent ones (MoE experts, per-head k_b/v_b).
struct MatJob {
  Mat w;
  const void* act = nullptr;  // rows in vec_dot_type(w.type)
  size_t act_stride = 0;      // bytes
  int64_t n_tok = 0;
  float* out = nullptr;
  int64_t out_stride = 0;  // elements
  // Optional gated partner (the up matrix of a SwiGLU FFN, same n_in and n_out as w):
  // up over up_act into up_out (same strides as out), and then, by the thread that
  // computed both row blocks, out = silu(out) * up_out on those rows.
  Mat up{};
  const void* up_act = nullptr;
  size_t up_act_stride = 0;
  float* up_out = nullptr;
};

// A gated pair: gate over act_g into out, up over act_u into up_out, then out = silu(out) * up_out.
inline MatJob gated_job(const Mat& gate, const void* act_g, size_t stride_g, const Mat& up, const void* act_u,
                        size_t stride_u, int64_t n_tok, float* out, float* up_out, int64_t out_stride) {
  MatJob j{gate, act_g, stride_g, n_tok, out, out_stride};
  j.up = up;
  j.up_act = act_u;
  j.up_act_stride = stride_u;
  j.up_out = up_out;
  return j;
}

struct ForwardCtx {
  const KernelTable& kt;
  ThreadPool& pool;
  Arena& arena;
  const Batch& batch;
  KvLayout kv;
  const TraceFn* trace = nullptr;  // null: tracing off
  Profile* prof = nullptr;         // null: profiling off

  // Calls f(begin, end) on each thread with its share of [0, n).
  template <class F>
  void parallel_for(int64_t n, F&& f) {
    if (n <= 1) {  // one row (single-sequence decode): no thread hand-off
      if (n == 1) f(int64_t{0}, int64_t{1});
      return;
    }
    auto body = [&f, n](int ith, int nth) {
      int64_t b = 0, e = 0;
      ThreadPool::split(n, ith, nth, &b, &e);
      if (b < e) f(b, e);
    };
    pool.run(body);
  }

  // Attention work items: (sequence, block of up to kAttnQueryBlock queries, range of heads).
  // The kernels convert each KV tile once for all heads of a call that share it, so an item
  // normally takes every head; heads are split only when there are fewer query blocks than
  // threads (single-sequence decode on 2 threads: 2 halves, on KV-head boundaries when the
  // head count allows). Threads grab items one at a time: causal prefill makes later query
  // blocks costlier. f(seq, q0, n, h0, h1) runs queries [q0, q0 + n) of seqs[seq], heads
  // [h0, h1). Each (query, head) output is computed the same way whatever else its item
  // holds [BATCH_INVARIANT]. Uses kAttnItemBytes of arena per batch token (models count it
  // in scratch_bytes).
  static constexpr int64_t kAttnQueryBlock = 32;
  static constexpr size_t kAttnItemBytes = 32;
  template <class F>
  void for_each_attention_item(int n_head, F&& f) {
    struct QBlock {
      int seq;
      int64_t q0, n;
    };
    static_assert(sizeof(QBlock) <= kAttnItemBytes);
    int64_t n_blocks = 0;
    for (int s = 0; s < batch.n_seqs; ++s) n_blocks += (batch.seqs[s].n + kAttnQueryBlock - 1) / kAttnQueryBlock;
    if (n_blocks == 0) return;
    QBlock* blocks = arena.alloc<QBlock>(n_blocks);
    n_blocks = 0;
    for (int s = 0; s < batch.n_seqs; ++s)
      for (int64_t q0 = 0; q0 < batch.seqs[s].n; q0 += kAttnQueryBlock)
        blocks[n_blocks++] = QBlock{s, q0, std::min(kAttnQueryBlock, batch.seqs[s].n - q0)};
    const int64_t nth = pool.n_threads();
    const int groups = static_cast<int>(std::clamp<int64_t>((nth + n_blocks - 1) / n_blocks, 1, n_head));
    pool.parallel_for(n_blocks * groups, 1, [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; ++i) {
        const QBlock& qb = blocks[i / groups];
        const int g = static_cast<int>(i % groups);
        f(qb.seq, qb.q0, qb.n, n_head * g / groups, n_head * (g + 1) / groups);
      }
    });
  }

  // out[t * out_stride + r] = W row r . act row t, rows split over threads. act is
  // already in vec_dot_type(w.type) with rows act_stride bytes apart.
  void matmul(const Mat& w, const void* act, size_t act_stride, int64_t n_tok, float* out, int64_t out_stride);
  // All jobs in one parallel pass: each job's rows are cut into blocks that threads take
  // dynamically, so many small products (experts, heads) cost one synchronization. Gated
  // jobs of fewer than kGatedMinTok rows run as two plain jobs of that pass and get their
  // silu(gate) * up in a second, short pass (forward.cpp).
  void matmul_jobs(const MatJob* jobs, int n_jobs);
  // The single pass of matmul_jobs, gated jobs fused per row block.
  void matmul_pass(const MatJob* jobs, int n_jobs);
  // Quantizes n_rows rows of n floats (x_stride apart) into `type` rows (dst_stride bytes apart).
  void quantize_rows(GgmlType type, const float* x, int64_t x_stride, int64_t n_rows, int64_t n, uint8_t* dst,
                     size_t dst_stride);
  // y = rms_norm(x) * w, row by row (y may equal x).
  void rms_norm_rows(const float* x, int64_t x_stride, const Vec& w, float eps, int64_t n_rows, int64_t n, float* y,
                     int64_t y_stride);

  // RoPE on every batch row: x[t * tok_stride + h * head_stride + i], rows split over threads.
  void rope_rows(float* x, int n_head, int64_t head_stride, int64_t tok_stride, const RopeParams& p);

  // The sequence holding batch row t (rows of a sequence are contiguous, in order).
  const SeqSlice& seq_of(int64_t t) const {
    int lo = 0, hi = batch.n_seqs - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (batch.seqs[mid].t0 <= t)
        lo = mid;
      else
        hi = mid - 1;
    }
    return batch.seqs[lo];
  }
  // Batch row t's KV row in layer il (in its sequence's block at its position) [KV_LAYOUT].
  uint8_t* kv_row(int il, int64_t t) const {
    const int32_t p = batch.pos[t];
    const SeqSlice& sq = seq_of(t);
    assert(p / kv.block_size < sq.n_blocks);
    return const_cast<uint8_t*>(sq.kv_blocks[p / kv.block_size]) + kv.offset(il, p % kv.block_size);
  }

  void emit(const char* name, int il, const void* data, int64_t n_rows, int64_t n_cols) const {
    if (trace) (*trace)(name, il, data, n_rows, n_cols);
  }
};

// A block of float activation rows and its quantized forms, each made once on first
// request and reused by every matrix that consumes the same input (SPEC.md: "each
// activation row is quantized once").
class ActRows {
 public:
  ActRows(ForwardCtx& ctx, const float* x, int64_t n_rows, int64_t n, int64_t x_stride)
      : ctx_(ctx), x_(x), n_rows_(n_rows), n_(n), x_stride_(x_stride) {}
  // Rows in vec_dot_type(wtype); *row_bytes receives their stride.
  const void* get(GgmlType wtype, size_t* row_bytes);
  int64_t n_rows() const { return n_rows_; }

 private:
  static constexpr int kSlots = 4;
  ForwardCtx& ctx_;
  const float* x_;
  int64_t n_rows_, n_, x_stride_;
  GgmlType types_[kSlots] = {};
  const uint8_t* data_[kSlots] = {};
  size_t stride_[kSlots] = {};
  int n_slots_ = 0;
};

// y = W x for activation rows a: out[t * out_stride + r].
void matmul(ForwardCtx& ctx, const Mat& w, ActRows& a, float* out, int64_t out_stride);

// Several products of the same activation rows (Q/K/V, MLA's q_a and kv_a) in one parallel
// pass: one synchronization instead of one per matrix. Same outputs as separate matmul()s.
// At most 4 products.
struct MatOut {
  const Mat* w;
  float* out;
  int64_t out_stride;
};
void matmul_many(ForwardCtx& ctx, ActRows& a, std::initializer_list<MatOut> outs);

}  // namespace ds
