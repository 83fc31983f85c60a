// Token sampling; see sampler.h for the order of operations.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "constrain/matcher.h"

namespace ds {

Sampler::Sampler(const SamplingParams& params, int n_vocab)
    : p_(params), n_vocab_(n_vocab), rng_(params.seed), counts_(n_vocab, 0) {
  cands_.reserve(n_vocab);
  probs_.reserve(n_vocab);
  if (params.constraint) matcher_ = std::make_unique<constrain::Matcher>(params.constraint);
}

Sampler::~Sampler() = default;

void Sampler::accept(int32_t token) {
  history_.push_back(token);
}

void Sampler::sort_desc() {
  if (sorted_) return;
  std::sort(cands_.begin(), cands_.end(),
            [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); });
  sorted_ = true;
}

// Repetition penalties (llama.cpp's convention): a logit of a token seen in the window is
// divided by repeat_penalty when positive and multiplied when negative; then
// frequency_penalty * count + presence_penalty is subtracted.
void Sampler::apply_penalties() {
  const bool any = p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
  if (!any || p_.repeat_last_n == 0 || history_.empty()) return;
  const size_t n = p_.repeat_last_n < 0 ? history_.size() : std::min<size_t>(history_.size(), p_.repeat_last_n);
  const auto first = history_.end() - static_cast<std::ptrdiff_t>(n);
  for (auto it = first; it != history_.end(); ++it) {
    if (*it >= 0 && *it < n_vocab_) ++counts_[*it];
  }
  for (auto it = first; it != history_.end(); ++it) {
    if (*it < 0 || *it >= n_vocab_ || counts_[*it] == 0) continue;
    float& l = cands_[*it].logit;  // cands_ is still indexed by token id here
    l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
    l -= static_cast<float>(counts_[*it]) * p_.frequency_penalty + p_.presence_penalty;
    counts_[*it] = 0;  // each distinct token once
  }
}

void Sampler::softmax() {
  sort_desc();
  probs_.resize(cands_.size());
  const float mx = cands_.empty() ? 0.0f : cands_[0].logit;
  double sum = 0;
  for (size_t i = 0; i < cands_.size(); ++i) {
    probs_[i] = std::exp(cands_[i].logit - mx);
    sum += probs_[i];
  }
  for (float& p : probs_) p = static_cast<float>(p / sum);
}

void Sampler::top_k(int k) {
  if (k <= 0 || k >= static_cast<int>(cands_.size())) return;
  auto cmp = [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  std::partial_sort(cands_.begin(), cands_.begin() + k, cands_.end(), cmp);
  cands_.resize(k);
  sorted_ = true;
}

// Locally typical sampling (Meister et al. 2022): keep the tokens whose surprisal is closest
// to the distribution's entropy until their mass reaches p.
void Sampler::typical(float p) {
  if (p >= 1.0f || cands_.size() <= 1) return;
  softmax();
  double entropy = 0;
  for (float q : probs_) entropy -= q > 0 ? q * std::log(q) : 0.0;
  std::vector<size_t> order(cands_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto dev = [&](size_t i) { return std::abs(-std::log(probs_[i]) - entropy); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dev(a) < dev(b); });
  double mass = 0;
  size_t keep = 0;
  while (keep < order.size()) {
    mass += probs_[order[keep++]];
    if (mass >= p) break;
  }
  std::vector<Cand> kept;
  for (size_t i = 0; i < keep; ++i) kept.push_back(cands_[order[i]]);
  cands_ = std::move(kept);
  sorted_ = false;
}

void Sampler::top_p(float p) {
  if (p >= 1.0f || cands_.size() <= 1) return;
  softmax();
  double mass = 0;
  size_t keep = 0;
  while (keep < cands_.size()) {
    mass += probs_[keep++];
    if (mass >= p) break;
  }
  cands_.resize(keep);
}

void Sampler::min_p(float p) {
  if (p <= 0.0f || cands_.size() <= 1) return;
  sort_desc();
  const float floor = cands_[0].logit + std::log(p);  // prob >= p * max prob
  size_t keep = 1;
  while (keep < cands_.size() && cands_[keep].logit >= floor) ++keep;
  cands_.resize(keep);
}

void Sampler::report(int n, std::vector<TokenProb>* top) {
  if (!top || n <= 0) return;
  top->clear();
  for (size_t i = 0; i < cands_.size() && static_cast<int>(i) < n; ++i) {
    top->push_back({cands_[i].id, probs_[i]});
  }
}

// Keeps the candidates the constraint allows (cands_ is indexed by token id before this).
bool Sampler::apply_constraint() {
  const std::vector<uint64_t>& mask = matcher_->mask();
  size_t n = 0;
  for (size_t i = 0; i < cands_.size(); ++i) {
    const auto id = static_cast<size_t>(cands_[i].id);
    if (((mask[id / 64] >> (id % 64)) & 1) && cands_[i].logit > -std::numeric_limits<float>::infinity()) {
      cands_[n++] = cands_[i];
    }
  }
  cands_.resize(n);
  return n > 0;
}

void Sampler::note_logprobs() {
  float mx = -std::numeric_limits<float>::infinity();
  for (const Cand& c : cands_) mx = std::max(mx, c.logit);
  double sum = 0;
  for (const Cand& c : cands_) sum += std::exp(static_cast<double>(c.logit - mx));
  lse_ = mx + static_cast<float>(std::log(sum));
  last_top_.clear();
  const size_t k = std::min<size_t>(static_cast<size_t>(std::max(0, p_.top_logprobs)), cands_.size());
  if (k == 0) return;
  std::vector<Cand> best(cands_.begin(), cands_.end());
  std::partial_sort(
      best.begin(), best.begin() + static_cast<std::ptrdiff_t>(k), best.end(),
      [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); });
  for (size_t i = 0; i < k; ++i) last_top_.push_back({best[i].id, best[i].logit - lse_});
}

int32_t Sampler::sample(const float* logits, std::vector<TokenProb>* top) {
  const int32_t token = pick(logits, top);
  if (matcher_ && token >= 0) matcher_->accept_token(token);
  return token;
}

int32_t Sampler::pick(const float* logits, std::vector<TokenProb>* top) {
  cands_.resize(n_vocab_);
  for (int i = 0; i < n_vocab_; ++i) cands_[i] = {i, logits[i]};
  for (auto [id, bias] : p_.logit_bias) {
    if (id >= 0 && id < n_vocab_) cands_[id].logit += bias;
  }
  apply_penalties();
  sorted_ = false;
  if (matcher_ && !apply_constraint()) {
    if (top) top->clear();
    return -1;
  }
  if (p_.logprobs) note_logprobs();
  if (p_.temperature <= 0.0f) {
    if (p_.n_probs > 0) {
      softmax();  // over the whole vocabulary: the model's own probabilities
      report(p_.n_probs, top);
      last_logprob_ = cands_[0].logit - lse_;
      return cands_[0].id;
    }
    const auto best = std::max_element(cands_.begin(), cands_.end(), [](const Cand& a, const Cand& b) {
      return a.logit < b.logit || (a.logit == b.logit && a.id > b.id);
    });
    last_logprob_ = best->logit - lse_;
    return best->id;
  }
  top_k(p_.top_k);
  typical(p_.typical_p);
  top_p(p_.top_p);
  min_p(p_.min_p);
  for (auto& c : cands_) c.logit /= p_.temperature;
  softmax();
  // A uniform draw from the top 53 bits: the same on every platform, unlike
  // std::uniform_real_distribution.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  double acc = 0;
  size_t pick = cands_.size() - 1;
  for (size_t i = 0; i < cands_.size(); ++i) {
    acc += probs_[i];
    if (u < acc) {
      pick = i;
      break;
    }
  }
  report(p_.n_probs, top);
  while (pick > 0 && !(probs_[pick] > 0)) --pick;              // never a banned (-inf) token
  last_logprob_ = cands_[pick].logit * p_.temperature - lse_;  // undo the temperature
  return cands_[pick].id;
}

}  // namespace ds
