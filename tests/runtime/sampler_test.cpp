// Sampler tests: each filter against hand-computed distributions, penalties against their
// formulas, and the seeded RNG's reproducibility and frequencies.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "runtime/sampler.h"

namespace ds {
namespace {

SamplingParams plain(float temp) {
  SamplingParams p;
  p.temperature = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 1;
  return p;
}

// Draw n tokens from fixed logits; count each token.
std::map<int32_t, int> histogram(SamplingParams p, const std::vector<float>& logits, int n) {
  Sampler s(p, static_cast<int>(logits.size()));
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) ++h[s.sample(logits.data())];
  return h;
}

TEST(Sampler, GreedyTakesArgmaxLowestIdOnTies) {
  Sampler s(plain(0.0f), 5);
  const float l[5] = {1, 3, 2, 3, -1};
  EXPECT_EQ(s.sample(l), 1);
}

TEST(Sampler, GreedyReportsFullSoftmaxProbs) {
  SamplingParams p = plain(0.0f);
  p.n_probs = 2;
  Sampler s(p, 3);
  const float l[3] = {0.0f, std::log(3.0f), std::log(6.0f)};  // probs 0.1, 0.3, 0.6
  std::vector<TokenProb> top;
  EXPECT_EQ(s.sample(l, &top), 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].token, 2);
  EXPECT_NEAR(top[0].prob, 0.6f, 1e-6);
  EXPECT_EQ(top[1].token, 1);
  EXPECT_NEAR(top[1].prob, 0.3f, 1e-6);
}

TEST(Sampler, TemperatureOneFollowsSoftmax) {
  const std::vector<float> l = {0.0f, std::log(3.0f), std::log(6.0f)};
  auto h = histogram(plain(1.0f), l, 30000);
  // Binomial standard deviation at n=30000 is <= 0.003; 0.015 is five of them.
  EXPECT_NEAR(h[0] / 30000.0, 0.1, 0.015);
  EXPECT_NEAR(h[1] / 30000.0, 0.3, 0.015);
  EXPECT_NEAR(h[2] / 30000.0, 0.6, 0.015);
}

TEST(Sampler, LowTemperatureSharpens) {
  const std::vector<float> l = {0.0f, std::log(3.0f), std::log(6.0f)};
  auto h = histogram(plain(0.25f), l, 10000);
  // p ~ (0.1, 0.3, 0.6)^4 normalized: 0.0008, 0.0588, 0.9404
  EXPECT_NEAR(h[2] / 10000.0, 0.9404, 0.015);
}

TEST(Sampler, SameSeedSameDrawsDifferentSeedDifferent) {
  std::vector<float> l(100);
  for (int i = 0; i < 100; ++i) l[i] = std::sin(i * 0.7f);
  auto draws = [&](uint64_t seed) {
    SamplingParams p = plain(1.0f);
    p.seed = seed;
    Sampler s(p, 100);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.sample(l.data()));
    return out;
  };
  EXPECT_EQ(draws(42), draws(42));
  EXPECT_NE(draws(42), draws(43));
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p = plain(5.0f);
  p.top_k = 1;
  auto h = histogram(p, {0.5f, 2.0f, 1.9f, -3.0f}, 200);
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h[1], 200);
}

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  SamplingParams p = plain(1.0f);
  p.top_p = 0.85f;  // 0.6 + 0.3 = 0.9 >= 0.85: tokens 2 and 1 only
  auto h = histogram(p, {0.0f, std::log(3.0f), std::log(6.0f)}, 5000);
  EXPECT_EQ(h.count(0), 0u);
  EXPECT_NEAR(h[2] / 5000.0, 2.0 / 3.0, 0.03);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p = plain(1.0f);
  p.min_p = 0.4f;  // keep prob >= 0.4 * 0.6 = 0.24: tokens 2 and 1
  auto h = histogram(p, {0.0f, std::log(3.0f), std::log(6.0f)}, 3000);
  EXPECT_EQ(h.count(0), 0u);
  EXPECT_GT(h[1], 0);
}

TEST(Sampler, TypicalKeepsTokensNearEntropy) {
  // probs 0.7, 0.2, 0.1: entropy 0.802; surprisals 0.357, 1.609, 2.303 -> deviations
  // 0.445, 0.807, 1.501. typical_p = 0.5 keeps token 0 alone.
  SamplingParams p = plain(1.0f);
  p.typical_p = 0.5f;
  auto h = histogram(p, {std::log(0.7f), std::log(0.2f), std::log(0.1f)}, 500);
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0], 500);
  p.typical_p = 0.85f;  // 0.7 + 0.2 reaches it: tokens 0 and 1
  h = histogram(p, {std::log(0.7f), std::log(0.2f), std::log(0.1f)}, 3000);
  EXPECT_EQ(h.count(2), 0u);
  EXPECT_GT(h[1], 0);
}

TEST(Sampler, RepeatPenaltyFormula) {
  // Token 0: logit 2.0 seen -> 2.0 / 2 = 1.0; token 1: logit -1.0 seen -> -2.0;
  // token 2 unseen 1.5 wins greedy.
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.n_probs = 3;
  Sampler s(p, 3);
  s.accept(0);
  s.accept(1);
  s.accept(0);
  const float l[3] = {2.0f, -1.0f, 1.5f};
  std::vector<TokenProb> top;
  EXPECT_EQ(s.sample(l, &top), 2);
  const double z = std::exp(1.5) + std::exp(1.0) + std::exp(-2.0);
  EXPECT_NEAR(top[1].prob, std::exp(1.0) / z, 1e-6);
  EXPECT_NEAR(top[2].prob, std::exp(-2.0) / z, 1e-6);
}

TEST(Sampler, FrequencyAndPresencePenalties) {
  // Token 0 seen 3 times: 3.0 - 3*0.5 - 0.25 = 1.25 < token 1's 1.3.
  SamplingParams p = plain(0.0f);
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p, 2);
  for (int i = 0; i < 3; ++i) s.accept(0);
  const float l[2] = {3.0f, 1.3f};
  EXPECT_EQ(s.sample(l), 1);
  // Outside the window the penalty no longer applies.
  SamplingParams q = p;
  q.repeat_last_n = 2;
  Sampler t(q, 2);
  for (int i = 0; i < 3; ++i) t.accept(0);
  t.accept(1);
  t.accept(1);
  EXPECT_EQ(t.sample(l), 0);
}

TEST(Sampler, LogitBiasBansAndBoosts) {
  SamplingParams p = plain(1.0f);
  p.logit_bias = {{2, -INFINITY}, {0, 100.0f}};
  auto h = histogram(p, {0.0f, 5.0f, 9.0f}, 200);
  EXPECT_EQ(h[0], 200);
  p.logit_bias = {{2, -INFINITY}};
  p.temperature = 0.0f;
  Sampler s(p, 3);
  const float l[3] = {0.0f, 5.0f, 9.0f};
  EXPECT_EQ(s.sample(l), 1);
}

}  // namespace
}  // namespace ds
