// deepseek4 hyper-connections and KV compressor (../shared/SPEC-deepseek32-deepseek4.md
// 3.3 and 3.5), and the per-block cache row layout and RoPE parameters.
//
// Numerics follow the reference's fused CPU ops: the mixes of one token are computed in
// f32 in the order SPEC 3.3 gives (Sinkhorn denominators accumulated from eps, left to
// right, applied as a multiplication by the reciprocal; pre sums s = 0..3; X'[d] starts at
// post[d] * o and adds C[d][s] X[s] for s = 0..3). The mixing matrix m = fn . RMSNorm(X)
// is a quantized matmul like every other (activations in vec_dot_type(fn)).
#include <algorithm>
#include <cmath>

#include "model/deepseek4.h"

namespace ds::dsv4 {

namespace {
size_t align16(size_t n) {
  return (n + 15) & ~size_t{15};
}
float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
}  // namespace

RowLayout row_layout(const HParams& hp, int il, GgmlType t) {
  const int64_t D = hp.n_embd_head_k, DI = hp.n_idx_dim;
  const int ratio = hp.compress_ratio[static_cast<size_t>(il)];
  RowLayout l;
  size_t at = align16(ggml_row_size(t, D));
  if (ratio != 0) {
    l.comp = at;
    at += align16(ggml_row_size(t, D));
    l.state = at;
    at += static_cast<size_t>(2 * comp_mult(ratio) * D) * sizeof(float);
  }
  if (ratio == 4) {
    l.idx_comp = at;
    at += static_cast<size_t>(DI) * sizeof(float);
    l.idx_state = at;
    at += static_cast<size_t>(4 * DI) * sizeof(float);
  }
  l.end = align16(at);
  return l;
}

RopeParams rope_params(const HParams& hp, int ratio) {
  RopeParams p;
  p.n_rot = hp.n_rot;
  p.neox = false;
  if (ratio == 0) {
    p.freq_base = hp.rope_base;
    return p;
  }
  p.freq_base = hp.compress_rope_base;
  if (hp.rope_scaling == RopeScaling::kYarn) {
    const float fs = 1.0f / hp.rope_factor;
    p.freq_scale = fs;
    p.ext_factor = 1.0f;
    p.n_ctx_orig = hp.n_ctx_orig;
    p.beta_fast = hp.yarn_beta_fast;
    p.beta_slow = hp.yarn_beta_slow;
    // The reference cancels YaRN's magnitude 1 + 0.1 ln(1/fs) with its inverse, in f32
    // (SPEC 3.4): the product may be 1 +- 1 ulp, kept as computed.
    const float mag = 1.0f + 0.1f * std::log(1.0f / fs);
    p.attn_factor = (1.0f / mag) * mag;
  } else if (hp.rope_scaling == RopeScaling::kLinear) {
    p.freq_scale = 1.0f / hp.rope_factor;
  }
  return p;
}

void sinkhorn(float* c, int n, int iters, float eps) {
  // 1. softmax over dst for every src column, then + eps.
  for (int s = 0; s < n; ++s) {
    float mx = c[s];
    for (int d = 1; d < n; ++d) mx = std::max(mx, c[d * n + s]);
    float sum = 0.0f;
    for (int d = 0; d < n; ++d) {
      c[d * n + s] = std::exp(c[d * n + s] - mx);
      sum += c[d * n + s];
    }
    const float inv = 1.0f / sum;
    for (int d = 0; d < n; ++d) c[d * n + s] = c[d * n + s] * inv + eps;
  }
  auto rows = [&] {
    for (int d = 0; d < n; ++d) {
      float den = eps;
      for (int s = 0; s < n; ++s) den += c[d * n + s];
      const float inv = 1.0f / den;
      for (int s = 0; s < n; ++s) c[d * n + s] *= inv;
    }
  };
  auto cols = [&] {
    for (int s = 0; s < n; ++s) {
      float den = eps;
      for (int d = 0; d < n; ++d) den += c[d * n + s];
      const float inv = 1.0f / den;
      for (int d = 0; d < n; ++d) c[d * n + s] *= inv;
    }
  };
  // 2. one row normalization, 3. then iters - 1 (column, row) pairs.
  rows();
  for (int it = 1; it < iters; ++it) {
    cols();
    rows();
  }
}

void hc_pre(ForwardCtx& ctx, const HParams& hp, const Mat& fn, const Vec& base, const Vec& scale, const float* X,
            int64_t T, float* y, float* post, float* comb) {
  const int n = hp.n_hc;
  const int64_t E = hp.n_embd, W = n * E, nmix = fn.n_out;
  float* flat = ctx.arena.alloc<float>(T * W);
  ctx.rms_norm_rows(X, W, Vec{}, hp.norm_eps, T, W, flat, W);
  float* m = ctx.arena.alloc<float>(T * nmix);
  ActRows af(ctx, flat, T, W, W);
  matmul(ctx, fn, af, m, nmix);
  const float* b = base.data;
  const float s_pre = scale.data[0], s_post = scale.data[1], s_comb = scale.data[2];
  ctx.parallel_for(T, [&](int64_t t0, int64_t t1) {
    float pre[16];
    for (int64_t t = t0; t < t1; ++t) {
      const float* mt = m + t * nmix;
      float* pt = post + t * n;
      float* ct = comb + t * n * n;
      for (int s = 0; s < n; ++s) {
        pre[s] = sigmoid(mt[s] * s_pre + b[s]) + hp.hc_eps;
        pt[s] = 2.0f * sigmoid(mt[n + s] * s_post + b[n + s]);
      }
      for (int d = 0; d < n; ++d)
        for (int s = 0; s < n; ++s) ct[d * n + s] = mt[2 * n + d + n * s] * s_comb + b[2 * n + d + n * s];
      sinkhorn(ct, n, hp.hc_iters, hp.hc_eps);
      const float* xt = X + t * W;
      float* yt = y + t * E;
      for (int64_t i = 0; i < E; ++i) yt[i] = pre[0] * xt[i];
      for (int s = 1; s < n; ++s)
        for (int64_t i = 0; i < E; ++i) yt[i] += pre[s] * xt[s * E + i];
    }
  });
}

HcEntry hc_enter(ForwardCtx& ctx, const HParams& hp, const Mat& fn, const Vec& base, const Vec& scale, const Vec& norm,
                 const float* X, int64_t T) {
  const int64_t E = hp.n_embd;
  HcEntry h{.y = ctx.arena.alloc<float>(T * E),
            .post = ctx.arena.alloc<float>(T * hp.n_hc),
            .comb = ctx.arena.alloc<float>(T * hp.n_hc * hp.n_hc)};
  hc_pre(ctx, hp, fn, base, scale, X, T, h.y, h.post, h.comb);
  ctx.rms_norm_rows(h.y, E, norm, hp.norm_eps, T, E, h.y, E);
  return h;
}

void hc_post(ForwardCtx& ctx, const HParams& hp, const float* X, const float* o, const float* post, const float* comb,
             int64_t T, float* out) {
  const int n = hp.n_hc;
  const int64_t E = hp.n_embd, W = n * E;
  ctx.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = X + t * W;
      const float* ot = o + t * E;
      const float* ct = comb + t * n * n;
      for (int d = 0; d < n; ++d) {
        float* dst = out + t * W + d * E;
        const float pd = post[t * n + d];
        for (int64_t i = 0; i < E; ++i) dst[i] = pd * ot[i];
        for (int s = 0; s < n; ++s) {
          const float c = ct[d * n + s];
          for (int64_t i = 0; i < E; ++i) dst[i] += c * xt[s * E + i];
        }
      }
    }
  });
}

void hc_head(ForwardCtx& ctx, const HParams& hp, const Weights& w, const float* X, const int64_t* rows, int64_t n_rows,
             float* y) {
  const int n = hp.n_hc;
  const int64_t E = hp.n_embd, W = n * E;
  float* flat = ctx.arena.alloc<float>(n_rows * W);
  for (int64_t i = 0; i < n_rows; ++i) ctx.kt.rms_norm(X + rows[i] * W, nullptr, flat + i * W, W, hp.norm_eps);
  float* m = ctx.arena.alloc<float>(n_rows * n);
  ActRows af(ctx, flat, n_rows, W, W);
  matmul(ctx, w.output_hc_fn, af, m, n);
  for (int64_t i = 0; i < n_rows; ++i) {
    const float* xt = X + rows[i] * W;
    float pre[16];
    for (int s = 0; s < n; ++s) {
      pre[s] = sigmoid(m[i * n + s] * w.output_hc_scale.data[0] + w.output_hc_base.data[s]) + hp.hc_eps;
    }
    float* yt = y + i * E;
    for (int64_t e = 0; e < E; ++e) yt[e] = pre[0] * xt[e];
    for (int s = 1; s < n; ++s)
      for (int64_t e = 0; e < E; ++e) yt[e] += pre[s] * xt[s * E + e];
  }
}

void compress(const CompressorInputs& in, float* out, float* scratch) {
  // Per channel i: softmax over the positions of s(p, i), weights times v(p, i) (SPEC 3.5).
  // Ratio 4 reads channel i of the previous block's states (first half) and channel
  // width + i of this block's (second half); ratio 128 channel i of every position.
  const int64_t W = in.width;
  float* mx = scratch;
  float* sum = scratch + W;
  const int half = in.ratio == 4 ? 4 : in.n_pos;
  auto off = [&](int j) -> int64_t { return in.ratio == 4 && j >= half ? W : 0; };
  for (int64_t i = 0; i < W; ++i) {
    mx[i] = -INFINITY;
    sum[i] = 0.0f;
    out[i] = 0.0f;
  }
  for (int j = 0; j < in.n_pos; ++j) {
    if (!in.s[j]) continue;  // block 0's missing previous half: value 0, score -inf
    const float* s = in.s[j] + off(j);
    for (int64_t i = 0; i < W; ++i) mx[i] = std::max(mx[i], s[i]);
  }
  for (int j = 0; j < in.n_pos; ++j) {
    if (!in.s[j]) continue;
    const float* s = in.s[j] + off(j);
    const float* v = in.v[j] + off(j);
    for (int64_t i = 0; i < W; ++i) {
      const float e = std::exp(s[i] - mx[i]);
      sum[i] += e;
      out[i] += e * v[i];
    }
  }
  for (int64_t i = 0; i < W; ++i) out[i] /= sum[i];
}

}  // namespace ds::dsv4
