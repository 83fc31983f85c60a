// deepseek4 MoE sub-layer (../shared/SPEC-deepseek32-deepseek4.md 3.7):
//   l = router . f (f32);  p = sqrt(softplus(l))
//   chosen = tid2eid[token] (hash blocks, the input token's id) or top-K of p + bias
//   w_k = p[chosen_k] / max(sum_k p[chosen_k], 6.1035e-5) * expert_weights_scale
//   expert e: g = gate_e f, u = up_e f; u = clamp(u, -L, L), g = min(g, L) (L > 1e-6);
//             down_e (silu(g) * u)
//   out = sum over slots in order of w_k * expert_k, then + shared expert (its own L).
// The gate is clamped before SiLU (unlike other architectures' clamps of the SiLU output),
// so gate and up run as two plain products and the clamp and SiLU product get their own
// pass. Experts run as in ffn.cpp: the (token, slot) pairs sorted by expert, each expert
// once over its tokens' gathered, once-quantized rows [BATCH_INVARIANT].
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/deepseek4.h"
#include "model/ffn.h"

namespace ds::dsv4 {

namespace {

constexpr float kMinWeightSum = 6.103515625e-5f;  // SPEC 1.4: the weight sum is clamped
constexpr float kClampMin = 1e-6f;                // SPEC 3.7: limits at or below are "no clamp"

size_t floats(int64_t n) {
  return static_cast<size_t>(n) * sizeof(float) + 64;
}
size_t act_bytes(int64_t n_rows, int64_t n) {
  return static_cast<size_t>(n_rows) * (static_cast<size_t>(n) * 4 + 64) + 64;
}

float softplus(float x) {
  return x > 20.0f ? x : std::log(1.0f + std::exp(x));
}

// u = clamp(u, -L, L), g = min(g, L), then g = silu(g) * u; n values.
void clamped_swiglu(const KernelTable& kt, float* g, float* u, int64_t n, float limit) {
  if (limit > kClampMin) {
    for (int64_t i = 0; i < n; ++i) {
      u[i] = std::clamp(u[i], -limit, limit);
      g[i] = std::min(g[i], limit);
    }
  }
  kt.silu_mul(g, u, g, n);
}

// Router, selection and weights for every token: ids/wts [T][K] in slot order.
void route(ForwardCtx& ctx, const HParams& hp, const LayerWeights& lw, int il, ActRows& ax, int32_t* ids, float* wts) {
  ProfScope ps(ctx.prof, Stage::kRouter);
  const int64_t T = ax.n_rows();
  const int X = hp.n_expert, K = hp.n_expert_used;
  float* logits = ctx.arena.alloc<float>(T * X);
  matmul(ctx, lw.router, ax, logits, X);
  int32_t* order = ctx.arena.alloc<int32_t>(T * X);
  const bool hash = il < hp.n_hash_layer;
  ctx.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* p = logits + t * X;
      for (int e = 0; e < X; ++e) p[e] = std::sqrt(softplus(p[e]));
      int32_t* id = ids + t * K;
      if (hash) {
        std::memcpy(id, lw.tid2eid + static_cast<int64_t>(ctx.batch.tokens[t]) * K,
                    static_cast<size_t>(K) * sizeof(int32_t));
      } else {
        int32_t* o = order + t * X;
        float* sel = logits + t * X;  // choice scores p + bias, kept apart from p
        for (int e = 0; e < X; ++e) o[e] = e;
        const float* bias = lw.exp_probs_b.data;
        std::partial_sort(o, o + K, o + X, [&](int32_t a, int32_t b) {
          const float sa = sel[a] + bias[a], sb = sel[b] + bias[b];
          return sa != sb ? sa > sb : a < b;
        });
        std::copy_n(o, K, id);
      }
      float* w = wts + t * K;
      float sum = 0.0f;
      for (int k = 0; k < K; ++k) {
        w[k] = p[id[k]];
        sum += w[k];
      }
      if (hp.expert_weights_norm) {
        sum = std::max(sum, kMinWeightSum);
        for (int k = 0; k < K; ++k) w[k] /= sum;
      }
      for (int k = 0; k < K; ++k) w[k] *= hp.expert_weights_scale;
    }
  });
  ctx.emit("experts", il, ids, T, K);
}

}  // namespace

size_t moe_scratch(const HParams& hp, int64_t T) {
  const int64_t E = hp.n_embd, X = hp.n_expert, K = hp.n_expert_used, Fe = hp.n_ff_exp, TK = T * K;
  const int64_t Fs = Fe * hp.n_expert_shared;
  size_t s = 0;
  s += 2 * act_bytes(T, E);                             // quantized input (two types at most)
  s += floats(T * X) + floats(T * X) + 2 * floats(TK);  // logits, order, ids, weights
  s += 3 * floats(TK) + floats(X + 1);                  // sort arrays
  s += 2 * act_bytes(TK, E);                            // gathered rows
  s += 2 * floats(TK * Fe) + act_bytes(TK, Fe) + floats(TK * E);
  s += 2 * floats(T * Fs) + act_bytes(T, Fs) + floats(T * E);                           // shared expert
  s += static_cast<size_t>(4 * X + 8) * (sizeof(MatJob) + 64) + 3 * floats(4 * X + 9);  // jobs, matmul_jobs' own
  return s + 64 * 64;
}

void moe_ffn(ForwardCtx& ctx, const HParams& hp, const LayerWeights& lw, int il, const float* xn, float* out) {
  Arena& ar = ctx.arena;
  const int64_t T = ctx.batch.n_tok, E = hp.n_embd, TK = T * hp.n_expert_used;
  const int X = hp.n_expert, K = hp.n_expert_used;
  const int64_t Fe = lw.gate_exps.first.n_out;
  ActRows ax(ctx, xn, T, E, E);
  int32_t* ids = ar.alloc<int32_t>(TK);
  float* wts = ar.alloc<float>(TK);
  route(ctx, hp, lw, il, ax, ids, wts);

  // (token, slot) pairs sorted by expert (stable): expert e owns sorted rows [start[e], start[e+1]).
  int64_t* start = ar.alloc<int64_t>(X + 1);
  int64_t* order = ar.alloc<int64_t>(TK);   // sorted row -> t * K + slot
  int64_t* row_of = ar.alloc<int64_t>(TK);  // t * K + slot -> sorted row
  std::fill(start, start + X + 1, 0);
  for (int64_t i = 0; i < TK; ++i) ++start[ids[i] + 1];
  for (int e = 0; e < X; ++e) start[e + 1] += start[e];
  for (int64_t i = 0, e = 0; i < TK; ++i) {
    e = ids[i];
    order[start[e]] = i;
    row_of[i] = start[e]++;
  }
  for (int e = X; e > 0; --e) start[e] = start[e - 1];
  start[0] = 0;

  // Gathered, once-quantized input rows for the gate and up experts.
  auto gather = [&](const Mat& w, size_t* stride) {
    const auto* src = static_cast<const uint8_t*>(ax.get(w.type, stride));
    uint8_t* dst = ar.alloc_bytes(*stride * static_cast<size_t>(TK));
    const size_t rb = *stride;
    ctx.parallel_for(TK, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        std::memcpy(dst + static_cast<size_t>(i) * rb, src + static_cast<size_t>(order[i] / K) * rb, rb);
    });
    return dst;
  };
  size_t rg = 0, ru = 0;
  const uint8_t* xg = gather(lw.gate_exps.first, &rg);
  const uint8_t* xu = gather(lw.up_exps.first, &ru);
  float* G = ar.alloc<float>(TK * Fe);
  float* U = ar.alloc<float>(TK * Fe);
  const bool shared = static_cast<bool>(lw.gate_shexp);
  const int64_t Fs = shared ? lw.gate_shexp.n_out : 0;
  float* SG = shared ? ar.alloc<float>(T * Fs) : nullptr;
  float* SU = shared ? ar.alloc<float>(T * Fs) : nullptr;
  MatJob* jobs = ar.alloc<MatJob>(2 * X + 2);
  int n = 0;
  for (int e = 0; e < X; ++e) {
    const int64_t s = start[e], m = start[e + 1] - s;
    if (m == 0) continue;
    jobs[n++] = MatJob{lw.gate_exps.at(e), xg + static_cast<size_t>(s) * rg, rg, m, G + s * Fe, Fe};
    jobs[n++] = MatJob{lw.up_exps.at(e), xu + static_cast<size_t>(s) * ru, ru, m, U + s * Fe, Fe};
  }
  if (shared) {
    size_t sg = 0, su = 0;
    const void* ag = ax.get(lw.gate_shexp.type, &sg);
    const void* au = ax.get(lw.up_shexp.type, &su);
    jobs[n++] = MatJob{lw.gate_shexp, ag, sg, T, SG, Fs};
    jobs[n++] = MatJob{lw.up_shexp, au, su, T, SU, Fs};
  }
  ctx.matmul_jobs(jobs, n);

  const float L_exp = hp.swiglu_clamp_exp[static_cast<size_t>(il)];
  const float L_sh = hp.swiglu_clamp_shexp[static_cast<size_t>(il)];
  ctx.parallel_for(TK + (shared ? T : 0), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      if (i < TK) {
        clamped_swiglu(ctx.kt, G + i * Fe, U + i * Fe, Fe, L_exp);
      } else {
        clamped_swiglu(ctx.kt, SG + (i - TK) * Fs, SU + (i - TK) * Fs, Fs, L_sh);
      }
    }
  });

  size_t rd = 0;
  const uint8_t* gq = act_for_matmul(ctx, lw.down_exps.first, G, TK, Fe, &rd);
  float* Dn = ar.alloc<float>(TK * E);
  float* S = shared ? ar.alloc<float>(T * E) : nullptr;
  n = 0;
  for (int e = 0; e < X; ++e) {
    const int64_t s = start[e], m = start[e + 1] - s;
    if (m > 0) jobs[n++] = MatJob{lw.down_exps.at(e), gq + static_cast<size_t>(s) * rd, rd, m, Dn + s * E, E};
  }
  if (shared) {
    size_t rs = 0;
    const uint8_t* sq = act_for_matmul(ctx, lw.down_shexp, SG, T, Fs, &rs);
    jobs[n++] = MatJob{lw.down_shexp, sq, rs, T, S, E};
  }
  ctx.matmul_jobs(jobs, n);

  ctx.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out + t * E;
      for (int k = 0; k < K; ++k) {
        const float w = wts[t * K + k];
        const float* d = Dn + row_of[t * K + k] * E;
        if (k == 0) {
          for (int64_t i = 0; i < E; ++i) o[i] = d[i] * w;
        } else {
          for (int64_t i = 0; i < E; ++i) o[i] += d[i] * w;
        }
      }
      if (S) {
        for (int64_t i = 0; i < E; ++i) o[i] += S[t * E + i];
      }
    }
  });
}

}  // namespace ds::dsv4
