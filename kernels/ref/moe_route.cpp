// Reference MoE routing (SPEC.md deepseek2 step 5), one token at a time:
//   s = softmax(logits) or sigmoid(logits); choice = s + bias (bias only for choosing);
//   with groups, keep the n_group_used groups with the largest sum of their two best
//   choice scores; take the n_expert_used best choice scores (slots in descending order,
//   ties to the lower expert id); weights = s of the chosen; optional normalization by
//   their sum clamped to >= 6.1035e-5; times scale.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

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

// Indices of the k largest values of v (descending; equal values keep index order).
void top_k(const std::vector<float>& v, int k, std::vector<int>* idx) {
  idx->resize(v.size());
  std::iota(idx->begin(), idx->end(), 0);
  std::stable_sort(idx->begin(), idx->end(), [&](int a, int b) { return v[a] > v[b]; });
  idx->resize(static_cast<size_t>(k));
}

// Sets the choice scores of experts outside the best n_group_used groups to -inf.
void limit_groups(std::vector<float>* choice, int n_group, int n_group_used) {
  const int per = static_cast<int>(choice->size()) / n_group;
  std::vector<float> group_score(static_cast<size_t>(n_group));
  std::vector<int> idx;
  for (int g = 0; g < n_group; ++g) {
    std::vector<float> members(choice->begin() + g * per, choice->begin() + (g + 1) * per);
    top_k(members, std::min(2, per), &idx);
    float sum = 0.0f;
    for (int i : idx) sum += members[static_cast<size_t>(i)];
    group_score[static_cast<size_t>(g)] = sum;
  }
  top_k(group_score, n_group_used, &idx);
  std::vector<bool> keep(static_cast<size_t>(n_group), false);
  for (int g : idx) keep[static_cast<size_t>(g)] = true;
  for (int g = 0; g < n_group; ++g)
    if (!keep[static_cast<size_t>(g)])
      for (int i = 0; i < per; ++i) (*choice)[static_cast<size_t>(g * per + i)] = -INFINITY;
}

}  // namespace

void moe_route(const MoeRouteArgs& a) {
  std::vector<float> s(static_cast<size_t>(a.n_expert)), choice;
  std::vector<int> idx;
  for (int64_t it = 0; it < a.n_tok; ++it) {
    gate_probs(a.logits + it * a.n_expert, a.n_expert, a.gating, s.data());
    choice = s;
    if (a.bias)
      for (int i = 0; i < a.n_expert; ++i) choice[static_cast<size_t>(i)] += a.bias[i];
    if (a.n_group > 1 && a.n_group_used < a.n_group) limit_groups(&choice, a.n_group, a.n_group_used);
    top_k(choice, a.n_expert_used, &idx);
    int32_t* ids = a.ids + it * a.n_expert_used;
    float* w = a.weights + it * a.n_expert_used;
    float sum = 0.0f;
    for (int k = 0; k < a.n_expert_used; ++k) {
      ids[k] = idx[static_cast<size_t>(k)];
      w[k] = s[static_cast<size_t>(ids[k])];
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
