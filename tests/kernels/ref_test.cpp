// The scalar reference against independent definitions: quantized dot products against
// the dot product of the dequantized rows (kernels/quant/dequant.cpp) in double; norms,
// RoPE, softmax and SiLU against their formulas in double; MoE routing on hand-built cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernel_test_data.h"
#include "kernels/ref/ref.h"

namespace ds::test {
namespace {

// Per-block float rounding of the scaled integer sums: a few 2^-24 per block, relative
// to sum |w_i a_i|.
constexpr double kRefDotTol = 1e-5;
// Q4_1/Q5_1 add m * s, where s = d * sum(q) is stored as fp16 (SPEC.md Q8_1): 2^-11
// relative on that term.
constexpr double kQ81SumTol = 2e-3;

TEST(RefKernels, VecDotMatchesDequantizedDot) {
  std::mt19937 rng(1234);
  for (GgmlType t : weight_types()) {
    const int bs = ggml_type_traits(t).block_size;
    for (int64_t nb : {1, 3, 16}) {
      const int64_t n = nb * (bs == 1 ? 32 : bs) + (bs == 1 ? 5 : 0);
      const auto w = random_weights(rng, t, n, 1);
      const auto x = random_floats(rng, n);
      const auto act = quantize_rows(*kernel_table(Isa::kRef), t, x, n, 1);
      std::vector<float> fw(static_cast<size_t>(n)), fa(static_cast<size_t>(n));
      dequantize_row(t, w.data(), fw.data(), n);
      dequantize_row(vec_dot_type(t), act.data(), fa.data(), n);
      double exact = 0.0, scale = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        exact += static_cast<double>(fw[i]) * fa[i];
        scale += std::fabs(static_cast<double>(fw[i]) * fa[i]);
      }
      const bool q81 = vec_dot_type(t) == GgmlType::Q8_1;
      const double tol = (q81 ? kQ81SumTol : kRefDotTol) * scale + 1e-30;
      const float got = ref::vec_dot(t, n, w.data(), act.data());
      EXPECT_NEAR(got, exact, tol) << ggml_type_name(t) << " n=" << n;
    }
  }
}

TEST(RefKernels, RmsNormSoftmaxSiluMatchFormulas) {
  std::mt19937 rng(7);
  const int64_t n = 77;
  const auto x = random_floats(rng, n, -3.0f, 3.0f), w = random_floats(rng, n);
  std::vector<float> y(static_cast<size_t>(n));
  ref::rms_norm(x.data(), w.data(), y.data(), n, 1e-6f);
  double ss = 0.0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i] * inv * w[i], 1e-6 * std::fabs(x[i] * inv * w[i]) + 1e-7);

  std::vector<float> s = x;
  ref::softmax(s.data(), n, 0.5f);
  double den = 0.0;
  for (float v : x) den += std::exp(0.5 * v);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(s[i], std::exp(0.5 * x[i]) / den, 1e-7);

  ref::silu_mul(x.data(), w.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i] / (1.0 + std::exp(-static_cast<double>(x[i]))) * w[i], 1e-6);
}

// Angle of pair i at pos per SPEC.md (double precision).
double spec_theta(const RopeParams& p, int pos, int i) {
  const double d = p.n_rot;
  double te = pos * std::pow(static_cast<double>(p.freq_base), -2.0 * i / d);
  if (p.freq_factors) te /= p.freq_factors[i];
  const double ti = te * p.freq_scale;
  if (p.ext_factor == 0.0f) return ti;
  auto corr = [&](double b) { return d * std::log(p.n_ctx_orig / (2 * M_PI * b)) / (2 * std::log(p.freq_base)); };
  const double lo = std::max(0.0, std::floor(corr(p.beta_fast)));
  const double hi = std::min(d - 1, std::ceil(corr(p.beta_slow)));
  const double ramp = (1 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0)) * p.ext_factor;
  return ti * (1 - ramp) + te * ramp;
}

TEST(RefKernels, RopeMatchesSpecAngles) {
  const float ff[8] = {1, 1, 2, 4, 8, 8, 1.5f, 1};
  RopeParams yarn{.n_rot = 16, .freq_base = 10000.0f, .freq_scale = 1.0f / 40, .ext_factor = 1.0f, .n_ctx_orig = 4096};
  RopeParams linear{.n_rot = 16, .neox = true, .freq_base = 100000.0f, .freq_scale = 0.25f};
  RopeParams factors{.n_rot = 16, .freq_base = 500000.0f, .freq_factors = ff};
  for (const RopeParams& p : {yarn, linear, factors}) {
    const int head = 20, n_head = 2;
    std::mt19937 rng(3);
    const int32_t pos[3] = {0, 5, 37};
    auto x = random_floats(rng, 3 * n_head * head);
    auto y = x;
    ref::rope(
        {.x = y.data(), .n_tok = 3, .n_head = n_head, .tok_stride = n_head * head, .head_stride = head, .pos = pos}, p);
    for (int it = 0; it < 3; ++it)
      for (int ih = 0; ih < n_head; ++ih) {
        const float* a = x.data() + (it * n_head + ih) * head;
        const float* b = y.data() + (it * n_head + ih) * head;
        for (int i = 0; i < 8; ++i) {
          const int i0 = p.neox ? i : 2 * i, i1 = p.neox ? i + 8 : 2 * i + 1;
          const double th = spec_theta(p, pos[it], i);
          EXPECT_NEAR(b[i0], a[i0] * std::cos(th) - a[i1] * std::sin(th), 2e-5) << "pair " << i << " pos " << pos[it];
          EXPECT_NEAR(b[i1], a[i0] * std::sin(th) + a[i1] * std::cos(th), 2e-5);
        }
        for (int i = 16; i < head; ++i) EXPECT_EQ(b[i], a[i]);  // past n_rot: untouched
      }
  }
}

TEST(RefKernels, MoeRouteSigmoidBiasGroups) {
  // 8 experts in 4 groups of 2; expert 6 has the largest probability, but its bias makes
  // group {6,7} the worst for choosing; groups {2,3} and {0,1} win.
  const float logits[8] = {0.5f, 0.4f, 0.3f, 0.2f, -1.0f, -1.0f, 2.0f, -3.0f};
  const float bias[8] = {0.1f, 0.1f, 0.2f, 0.2f, 0.0f, 0.0f, -0.9f, 0.0f};
  int32_t ids[3];
  float w[3];
  float scratch[moe_route_scratch_floats(8)];
  ref::moe_route({.logits = logits,
                  .n_tok = 1,
                  .n_expert = 8,
                  .n_expert_used = 3,
                  .n_group = 4,
                  .n_group_used = 2,
                  .gating = MoeGating::kSigmoid,
                  .bias = bias,
                  .norm = true,
                  .scale = 2.5f,
                  .ids = ids,
                  .weights = w,
                  .scratch = scratch});
  // choice: 0:.722 1:.699 2:.774 3:.750 4,5:.269 6:-.019 7:.047 -> groups 1.421 1.524 .538 .028
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 0);
  double s[3], sum = 0;
  for (int k = 0; k < 3; ++k) sum += s[k] = 1.0 / (1.0 + std::exp(-logits[ids[k]]));
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(w[k], 2.5 * s[k] / sum, 1e-6);

  // Softmax without norm: weights are the plain probabilities times the scale.
  ref::moe_route(
      {.logits = logits, .n_tok = 1, .n_expert = 8, .n_expert_used = 2, .ids = ids, .weights = w, .scratch = scratch});
  double den = 0;
  for (float l : logits) den += std::exp(static_cast<double>(l));
  EXPECT_EQ(ids[0], 6);
  EXPECT_EQ(ids[1], 0);
  EXPECT_NEAR(w[0], std::exp(2.0) / den, 1e-7);
  EXPECT_NEAR(w[1], std::exp(0.5) / den, 1e-7);
}

// The selection against the rule as SPEC.md states it, written with a stable descending sort:
// logits on a coarse grid so that choice scores, group scores and the -inf of masked groups
// tie often, and more experts used than the kept groups hold (the rest come from masked
// groups, in expert order).
TEST(RefKernels, MoeRouteSelectionMatchesStableSortOnTies) {
  const auto top = [](const std::vector<float>& v, int k) {
    std::vector<int> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return v[a] > v[b]; });
    idx.resize(static_cast<size_t>(k));
    return idx;
  };
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> level(-2, 2);
  int cases = 0;
  for (const auto& [n_expert, n_group, n_group_used, k] :
       std::vector<std::array<int, 4>>{{16, 4, 2, 6}, {16, 4, 1, 6}, {12, 6, 3, 4}, {8, 8, 3, 3}, {9, 1, 1, 9}}) {
    for (int rep = 0; rep < 50; ++rep, ++cases) {
      std::vector<float> logits(static_cast<size_t>(n_expert)), bias(static_cast<size_t>(n_expert));
      for (auto& l : logits) l = 0.5f * static_cast<float>(level(rng));
      for (auto& b : bias) b = 0.25f * static_cast<float>(level(rng) % 2);
      std::vector<int32_t> ids(static_cast<size_t>(k));
      std::vector<float> w(static_cast<size_t>(k)), scratch(static_cast<size_t>(moe_route_scratch_floats(n_expert)));
      ref::moe_route({.logits = logits.data(),
                      .n_tok = 1,
                      .n_expert = n_expert,
                      .n_expert_used = k,
                      .n_group = n_group,
                      .n_group_used = n_group_used,
                      .gating = MoeGating::kSigmoid,
                      .bias = bias.data(),
                      .ids = ids.data(),
                      .weights = w.data(),
                      .scratch = scratch.data()});
      std::vector<float> choice(static_cast<size_t>(n_expert));
      for (int i = 0; i < n_expert; ++i) choice[i] = 1.0f / (1.0f + std::exp(-logits[i])) + bias[i];
      if (n_group > 1 && n_group_used < n_group) {
        const int per = n_expert / n_group;
        std::vector<float> score(static_cast<size_t>(n_group));
        for (int g = 0; g < n_group; ++g) {
          const std::vector<float> m(choice.begin() + g * per, choice.begin() + (g + 1) * per);
          for (int i : top(m, std::min(2, per))) score[g] += m[i];
        }
        std::vector<bool> keep(static_cast<size_t>(n_group));
        for (int g : top(score, n_group_used)) keep[g] = true;
        for (int i = 0; i < n_expert; ++i)
          if (!keep[i / per]) choice[i] = -INFINITY;
      }
      const std::vector<int> want = top(choice, k);
      ASSERT_EQ(std::vector<int>(ids.begin(), ids.end()), want) << "experts " << n_expert << " groups " << n_group;
    }
  }
  EXPECT_EQ(cases, 250);
}

}  // namespace
}  // namespace ds::test
