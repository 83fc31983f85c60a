// Dense FFN and DeepSeek MoE (../shared/SPEC.md deepseek2 step 5 and "MoE weights").
//
// MoE design: the step's (token, slot) pairs are sorted by expert (stable, so each
// expert's rows are in token order); each expert's gate/up/down products then run once
// over all the tokens routed to it, on activation rows gathered from the once-quantized
// input. Each output row depends only on its own token [BATCH_INVARIANT]. Expert outputs
// are scaled by their weights, summed in slot order, then the shared experts are added,
// exactly the reference's order of float operations.
#include "model/ffn.h"

#include <algorithm>
#include <cstring>

namespace ds {

namespace {
constexpr size_t kAlign = 64;
size_t floats(int64_t n) {
  return static_cast<size_t>(n) * sizeof(float) + kAlign;
}
// Upper bound of a quantized activation block: every vec_dot_type is <= 4 bytes/element.
size_t act_bytes(int64_t n_rows, int64_t n) {
  return static_cast<size_t>(n_rows) * (static_cast<size_t>(n) * 4 + 64) + kAlign;
}
}  // namespace

size_t dense_ffn_scratch(int64_t n_tok, int64_t n_embd, int64_t n_ff) {
  (void)n_embd;
  const int64_t t = std::min(n_tok, kFfnTokChunk);
  return 2 * floats(t * n_ff) + act_bytes(t, n_ff);
}

void dense_ffn(ForwardCtx& ctx, ActRows& a, const Mat& gate, const Mat& up, const Mat& down, float* out) {
  const int64_t T = a.n_rows(), F = gate.n_out;
  size_t sg = 0, su = 0;
  const auto* ag = static_cast<const uint8_t*>(a.get(gate.type, &sg));
  const auto* au = static_cast<const uint8_t*>(a.get(up.type, &su));
  float* g = ctx.arena.alloc<float>(std::min(T, kFfnTokChunk) * F);  // one pass's rows, reused
  float* u = ctx.arena.alloc<float>(std::min(T, kFfnTokChunk) * F);
  const size_t mark = ctx.arena.mark();
  for (int64_t t0 = 0; t0 < T; t0 += kFfnTokChunk) {
    const int64_t nt = std::min(kFfnTokChunk, T - t0);
    // gate, up and silu(gate) * up in one parallel pass over the once-quantized rows
    const MatJob job = gated_job(gate, ag + t0 * sg, sg, up, au + t0 * su, su, nt, g, u, F);
    ctx.matmul_jobs(&job, 1);
    ctx.arena.reset(mark);
    ActRows b(ctx, g, nt, F, F);
    matmul(ctx, down, b, out + t0 * down.n_out, down.n_out);
    ctx.arena.reset(mark);
  }
}

size_t moe_ffn_scratch(const HParams& hp, int64_t T) {
  const int64_t E = hp.n_embd, X = hp.n_expert, K = hp.n_expert_used, Fe = hp.n_ff_exp;
  const int64_t TK = T * K;
  size_t s = 0;
  s += act_bytes(T, E) * 2;                              // quantized input (up to two types)
  s += floats(T * X);                                    // router logits
  s += floats(moe_route_scratch_floats(hp.n_expert));    // routing's working space
  s += 2 * floats(TK) + 3 * floats(TK) + floats(X + 1);  // ids, weights, order, row_of, counts
  s += act_bytes(TK, E) * 2;                             // gathered rows for gate and up
  s += 2 * floats(TK * Fe) + act_bytes(TK, Fe);          // gate/up outputs, quantized for down
  s += floats(TK * E);                                   // expert outputs
  s += static_cast<size_t>(2 * X + 2) * sizeof(MatJob) + 3 * floats(2 * X + 3) + kAlign;  // jobs, item offsets, order
  if (hp.n_expert_shared > 0) s += floats(T * E) + dense_ffn_scratch(T, E, Fe * hp.n_expert_shared);
  return s;
}

namespace {

struct Routing {
  const int32_t* ids;  // [T][K]
  const float* wts;    // [T][K]
  int64_t* start;      // [X + 1]: expert e's rows are [start[e], start[e+1]) of the sorted order
  int64_t* order;      // [T*K]: sorted row -> t*K + slot
  int64_t* row_of;     // [T*K]: t*K + slot -> sorted row
};

// Stable counting sort of the (token, slot) pairs by expert id.
void sort_by_expert(int64_t TK, int X, Routing& r) {
  for (int e = 0; e <= X; ++e) r.start[e] = 0;
  for (int64_t i = 0; i < TK; ++i) ++r.start[r.ids[i] + 1];
  for (int e = 0; e < X; ++e) r.start[e + 1] += r.start[e];
  for (int64_t i = 0; i < TK; ++i) {  // start[e] advances to start[e+1] while filling
    const int e = r.ids[i];
    const int64_t row = r.start[e]++;
    r.order[row] = i;
    r.row_of[i] = row;
  }
  for (int e = X; e > 0; --e) r.start[e] = r.start[e - 1];
  r.start[0] = 0;
}

// Copies the quantized rows of each sorted (token, slot) into contiguous rows.
void gather_rows(ForwardCtx& ctx, const uint8_t* src, size_t rb, int64_t K, const Routing& r, int64_t TK,
                 uint8_t* dst) {
  ctx.parallel_for(TK, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(dst + static_cast<size_t>(i) * rb, src + static_cast<size_t>(r.order[i] / K) * rb, rb);
  });
}

}  // namespace

const uint8_t* act_for_matmul(ForwardCtx& ctx, const Mat& w, const float* x, int64_t n_rows, int64_t n,
                              size_t* stride) {
  const GgmlType at = vec_dot_type(w.type);
  *stride = static_cast<size_t>(n) * sizeof(float);
  if (at == GgmlType::F32) return reinterpret_cast<const uint8_t*>(x);
  *stride = ggml_row_size(at, n);
  uint8_t* q = ctx.arena.alloc_bytes(*stride * static_cast<size_t>(n_rows));
  ctx.quantize_rows(at, x, n, n_rows, n, q, *stride);
  return q;
}

namespace {

// Router (f32, never quantized), selection, and the (token, slot) pairs sorted by expert.
Routing route(ForwardCtx& ctx, const HParams& hp, const LayerWeights& lw, int il, ActRows& ax) {
  ProfScope ps(ctx.prof, Stage::kRouter);
  Arena& ar = ctx.arena;
  const int64_t T = ax.n_rows(), TK = T * hp.n_expert_used;
  const int X = hp.n_expert;
  float* logits = ar.alloc<float>(T * X);
  matmul(ctx, lw.router, ax, logits, X);
  int32_t* ids = ar.alloc<int32_t>(TK);
  float* wts = ar.alloc<float>(TK);
  ctx.kt.moe_route(MoeRouteArgs{.logits = logits,
                                .n_tok = T,
                                .n_expert = X,
                                .n_expert_used = hp.n_expert_used,
                                .n_group = hp.n_group,
                                .n_group_used = hp.n_group_used,
                                .gating = hp.gating,
                                .bias = lw.exp_probs_b.data,
                                .norm = hp.expert_weights_norm,
                                .scale = hp.expert_weights_scale,
                                .ids = ids,
                                .weights = wts,
                                .scratch = ar.alloc<float>(moe_route_scratch_floats(X))});
  ctx.emit("experts", il, ids, T, hp.n_expert_used);
  Routing r{ids, wts, ar.alloc<int64_t>(X + 1), ar.alloc<int64_t>(TK), ar.alloc<int64_t>(TK)};
  sort_by_expert(TK, X, r);
  return r;
}

// One job per active expert of `w`, on activation rows act (sorted order) -> out rows.
int expert_jobs(const ExpertMats& w, const Routing& r, int X, const uint8_t* act, size_t act_stride, float* out,
                int64_t out_stride, MatJob* jobs) {
  int n = 0;
  for (int e = 0; e < X; ++e) {
    const int64_t s = r.start[e], m = r.start[e + 1] - s;
    if (m > 0)
      jobs[n++] =
          MatJob{w.at(e), act + static_cast<size_t>(s) * act_stride, act_stride, m, out + s * out_stride, out_stride};
  }
  return n;
}

// The shared experts' intermediate rows [T][F] (silu(gate x) * up x), F = 0 without them.
struct SharedRows {
  float* g = nullptr;
  int64_t F = 0;
};

// The shared experts' gated gate/up job over x (unsorted rows) into `job`; 0 without them.
int shared_gate_up_job(ForwardCtx& ctx, const LayerWeights& lw, ActRows& ax, SharedRows* sh, MatJob* job) {
  if (!lw.gate_shexp) return 0;
  const int64_t T = ax.n_rows();
  sh->F = lw.gate_shexp.n_out;
  sh->g = ctx.arena.alloc<float>(T * sh->F);
  float* su = ctx.arena.alloc<float>(T * sh->F);
  size_t sg = 0, sb = 0;
  const void* ag = ax.get(lw.gate_shexp.type, &sg);
  const void* au = ax.get(lw.up_shexp.type, &sb);
  *job = gated_job(lw.gate_shexp, ag, sg, lw.up_shexp, au, sb, T, sh->g, su, sh->F);
  return 1;
}

// silu(gate x) * up x for every sorted (token, slot) row: [TK][Fe]; one gated job per
// active expert, and the shared experts' in the same parallel pass (one synchronization).
float* experts_gate_up(ForwardCtx& ctx, const LayerWeights& lw, const Routing& r, int X, int K, ActRows& ax,
                       MatJob* jobs, SharedRows* sh) {
  Arena& ar = ctx.arena;
  const int64_t TK = ax.n_rows() * K, Fe = lw.gate_exps.first.n_out;
  size_t rb_g = 0, rb_u = 0;
  const auto* xq_g = static_cast<const uint8_t*>(ax.get(lw.gate_exps.first.type, &rb_g));
  const auto* xq_u = static_cast<const uint8_t*>(ax.get(lw.up_exps.first.type, &rb_u));
  uint8_t* gx_g = ar.alloc_bytes(rb_g * static_cast<size_t>(TK));
  gather_rows(ctx, xq_g, rb_g, K, r, TK, gx_g);
  uint8_t* gx_u = gx_g;
  if (xq_u != xq_g) {
    gx_u = ar.alloc_bytes(rb_u * static_cast<size_t>(TK));
    gather_rows(ctx, xq_u, rb_u, K, r, TK, gx_u);
  }
  float* G = ar.alloc<float>(TK * Fe);
  float* U = ar.alloc<float>(TK * Fe);
  int n = 0;
  for (int e = 0; e < X; ++e) {
    const int64_t s = r.start[e], m = r.start[e + 1] - s;
    if (m > 0)
      jobs[n++] = gated_job(lw.gate_exps.at(e), gx_g + static_cast<size_t>(s) * rb_g, rb_g, lw.up_exps.at(e),
                            gx_u + static_cast<size_t>(s) * rb_u, rb_u, m, G + s * Fe, U + s * Fe, Fe);
  }
  n += shared_gate_up_job(ctx, lw, ax, sh, jobs + n);
  ctx.matmul_jobs(jobs, n);
  return G;
}

// down(G) for every sorted row: [TK][E]; with shared experts also *S = down_shexp(sh.g)
// [T][E], in the same parallel pass.
float* experts_down(ForwardCtx& ctx, const LayerWeights& lw, const Routing& r, int X, int64_t T, int64_t TK, float* G,
                    const SharedRows& sh, MatJob* jobs, float** S) {
  Arena& ar = ctx.arena;
  const int64_t Fe = lw.down_exps.first.n_in, E = lw.down_exps.first.n_out;
  size_t gq_stride = 0;
  const uint8_t* gq = act_for_matmul(ctx, lw.down_exps.first, G, TK, Fe, &gq_stride);
  float* D = ar.alloc<float>(TK * E);
  int n = expert_jobs(lw.down_exps, r, X, gq, gq_stride, D, E, jobs);
  if (sh.g) {
    size_t sq_stride = 0;
    const uint8_t* sq = act_for_matmul(ctx, lw.down_shexp, sh.g, T, sh.F, &sq_stride);
    *S = ar.alloc<float>(T * E);
    jobs[n++] = MatJob{lw.down_shexp, sq, sq_stride, T, *S, E};
  }
  ctx.matmul_jobs(jobs, n);
  return D;
}

}  // namespace

void moe_ffn(ForwardCtx& ctx, const HParams& hp, const LayerWeights& lw, int il, const float* xn, float* out) {
  const int64_t T = ctx.batch.n_tok, E = hp.n_embd;
  const int X = hp.n_expert, K = hp.n_expert_used;
  ActRows ax(ctx, xn, T, E, E);
  const Routing r = route(ctx, hp, lw, il, ax);
  MatJob* jobs = ctx.arena.alloc<MatJob>(2 * X + 2);
  SharedRows sh;
  float* G = experts_gate_up(ctx, lw, r, X, K, ax, jobs, &sh);
  float* S = nullptr;
  const float* D = experts_down(ctx, lw, r, X, T, T * K, G, sh, jobs, &S);

  // out = sum over slots in order of w * expert_out, then + shared (the reference's order).
  ctx.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out + t * E;
      for (int k = 0; k < K; ++k) {
        const float w = r.wts[t * K + k];
        const float* d = D + r.row_of[t * K + k] * E;
        if (k == 0) {
          for (int64_t i = 0; i < E; ++i) o[i] = d[i] * w;
        } else {
          for (int64_t i = 0; i < E; ++i) o[i] = o[i] + d[i] * w;
        }
      }
      if (S) {
        for (int64_t i = 0; i < E; ++i) o[i] += S[t * E + i];
      }
    }
  });
}

}  // namespace ds
