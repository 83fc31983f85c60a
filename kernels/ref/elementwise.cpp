// Reference RMSNorm, RoPE, SiLU gate and softmax, in the reference ecosystem's order of
// operations: sums of squares and softmax denominators accumulate in double, RoPE angles
// advance by repeated multiplication with base^(-2/n_rot) (so float rounding matches).
#include <algorithm>
#include <cmath>

#include "kernels/ref/ref.h"

namespace ds::ref {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

namespace {
// YaRN correction dimension for a rotation count b (SPEC.md deepseek2 step 4).
float yarn_corr_dim(int n_dims, int n_ctx_orig, float b, float base) {
  return static_cast<float>(n_dims) * std::log(static_cast<float>(n_ctx_orig) / (b * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}
}  // namespace

// [ROPE] Angles exactly as SPEC.md step 4 (YaRN) / kernels.h (linear, freq_factors).
// The magnitude is attn_factor only: YaRN's attention scaling is the caller's kq_scale.
void rope_cos_sin(const RopeParams& p, int32_t pos, float* cs) {
  const int d = p.n_rot;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(d));
  float lo = 0.0f, hi = 0.0f;
  if (p.ext_factor != 0.0f) {
    lo = std::max(0.0f, std::floor(yarn_corr_dim(d, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    hi = std::min(static_cast<float>(d - 1), std::ceil(yarn_corr_dim(d, p.n_ctx_orig, p.beta_slow, p.freq_base)));
  }
  float theta_base = static_cast<float>(pos);
  for (int i = 0; i < d / 2; ++i) {
    const float ff = p.freq_factors ? p.freq_factors[i] : 1.0f;
    const float theta_extrap = theta_base / ff;
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - lo) / std::max(0.001f, hi - lo);
      const float ramp = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      theta = theta_interp * (1.0f - ramp) + theta_extrap * ramp;
    }
    cs[2 * i] = std::cos(theta) * p.attn_factor;
    cs[2 * i + 1] = std::sin(theta) * p.attn_factor;
    theta_base *= theta_scale;
  }
}

void rope(const RopeArgs& a, const RopeParams& p) {
  float cs[1024];  // n_rot <= 1024
  const int half = p.n_rot / 2;
  for (int64_t it = 0; it < a.n_tok; ++it) {
    rope_cos_sin(p, a.pos[it], cs);
    for (int ih = 0; ih < a.n_head; ++ih) {
      float* x = a.x + it * a.tok_stride + ih * a.head_stride;
      for (int i = 0; i < half; ++i) {
        const int i0 = p.neox ? i : 2 * i;
        const int i1 = p.neox ? i + half : 2 * i + 1;
        const float x0 = x[i0], x1 = x[i1];
        const float c = cs[2 * i], s = cs[2 * i + 1];
        x[i0] = x0 * c - x1 * s;
        x[i1] = x0 * s + x1 * c;
      }
    }
  }
}

void silu_mul(const float* g, const float* u, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = g[i];
    y[i] = (x / (1.0f + std::exp(-x))) * u[i];
  }
}

void softmax(float* x, int64_t n, float scale) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    x[i] *= scale;
    max = std::max(max, x[i]);
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace ds::ref
