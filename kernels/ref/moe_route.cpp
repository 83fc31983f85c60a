// Reference MoE routing (SPEC.md deepseek2 step 5), one token at a time:
//   s = softmax(logits) or sigmoid(logits); choice = s + bias (bias only for choosing);
//   with groups, keep the n_group_used groups with the largest sum of their two best
//   choice scores; take the n_expert_used best choice scores (slots in descending order,
//   ties to the lower expert id); weights = s of the chosen; optional normalization by
//   their sum clamped to >= 6.1035e-5; times scale.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/ref/ref.h"

namespace ds::ref {
namespace {

constexpr float kMinWeightSum = 6.103515625e-5f;  // SPEC.md: clamp before normalizing

void gate_probs(const float* logits, int n, MoeGating gating, float* s) {
  if (gating == MoeGating::kSigmoid) {
    for (int i = 0; i < n; ++i) s[i] = 1.0f / (1.0f + std::exp(-logits[i]));
    return;
  }
  for (int i = 0; i < n; ++i) s[i] = logits[i];
  softmax(s, n, 1.0f);
}

// Writes the indices of the k largest values of v[0..n) to idx, largest first; equal values
// keep index order (a stable descending sort's first k). Selection by repeated scans, O(n k),
// with no working memory: k is the handful of experts or groups a token keeps.
void top_k(const float* v, int n, int k, int32_t* idx) {
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (best >= 0 && !(v[i] > v[best])) continue;
      bool taken = false;
      for (int q = 0; q < j && !taken; ++q) taken = idx[q] == i;
      if (!taken) best = i;
    }
    idx[j] = best;
  }
}

// Sets the choice scores of experts outside the best n_group_used groups to -inf; a group
// scores the sum of its two best choice scores (ties to the lower group id).
// group_score, kept: n_group floats of scratch each.
void limit_groups(float* choice, int n_expert, int n_group, int n_group_used, float* group_score, float* kept) {
  const int per = n_expert / n_group;
  for (int g = 0; g < n_group; ++g) {
    int32_t best[2];
    const int k = std::min(2, per);
    top_k(choice + g * per, per, k, best);
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += choice[g * per + best[i]];
    group_score[g] = sum;
    kept[g] = 0.0f;
  }
  for (int j = 0; j < n_group_used; ++j) {
    int best = -1;
    for (int g = 0; g < n_group; ++g)
      if (kept[g] == 0.0f && (best < 0 || group_score[g] > group_score[best])) best = g;
    kept[best] = 1.0f;
  }
  for (int g = 0; g < n_group; ++g)
    if (kept[g] == 0.0f)
      for (int i = 0; i < per; ++i) choice[g * per + i] = -INFINITY;
}

}  // namespace

void moe_route(const MoeRouteArgs& a) {
  float* s = a.scratch;
  float* choice = a.scratch + a.n_expert;
  float* group_score = a.scratch + 2 * a.n_expert;
  float* kept = group_score + a.n_group;
  for (int64_t it = 0; it < a.n_tok; ++it) {
    gate_probs(a.logits + it * a.n_expert, a.n_expert, a.gating, s);
    for (int i = 0; i < a.n_expert; ++i) choice[i] = a.bias ? s[i] + a.bias[i] : s[i];
    if (a.n_group > 1 && a.n_group_used < a.n_group)
      limit_groups(choice, a.n_expert, a.n_group, a.n_group_used, group_score, kept);
    int32_t* ids = a.ids + it * a.n_expert_used;
    float* w = a.weights + it * a.n_expert_used;
    top_k(choice, a.n_expert, a.n_expert_used, ids);
    float sum = 0.0f;
    for (int k = 0; k < a.n_expert_used; ++k) {
      w[k] = s[ids[k]];
      sum += w[k];
    }
    if (a.norm) {
      sum = std::max(sum, kMinWeightSum);
      for (int k = 0; k < a.n_expert_used; ++k) w[k] /= sum;
    }
    for (int k = 0; k < a.n_expert_used; ++k) w[k] *= a.scale;
  }
}

}  // namespace ds::ref
