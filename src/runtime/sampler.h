// Per-request token sampling on the CPU. Each request owns a Sampler with its own seeded
// RNG and its own token history, so the same seed and prompt give the same text no matter
// how many other requests share the batch (the engine's logits are batch invariant).
//
// Order of operations (the one llama.cpp's server applies, so clients see familiar
// behaviour): logit bias -> repetition penalties over the last repeat_last_n tokens ->
// greedy when temperature <= 0, else top-k -> typical-p -> top-p -> min-p -> temperature ->
// softmax -> one draw. An output constraint (constrain/matcher.h) removes the tokens its
// grammar rejects after the penalties, before any truncation: the filters and the
// probabilities reported by n_probs see only tokens that keep the output valid.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

namespace ds {

namespace constrain {
class Constraint;
class Matcher;
}  // namespace constrain

struct SamplingParams {
  float temperature = 0.8f;     // <= 0: greedy
  int top_k = 40;               // <= 0: whole vocabulary
  float top_p = 0.95f;          // 1: off
  float min_p = 0.05f;          // 0: off
  float typical_p = 1.0f;       // 1: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;       // 0: off, -1: whole history
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;        // added to logits (-inf bans a token)
  int n_probs = 0;                                          // report the n most probable tokens of each step
  std::shared_ptr<const constrain::Constraint> constraint;  // grammar the output must follow (null: none)
  // OpenAI logprobs: the sampled token's log-probability and the top_logprobs most likely
  // tokens, from the log-softmax of the logits after logit bias, penalties and the constraint,
  // before temperature and truncation (the model's distribution, not the sampling chain's).
  bool logprobs = false;
  int top_logprobs = 0;
};

struct TokenProb {
  int32_t token = 0;
  float prob = 0.0f;
};

class Sampler {
 public:
  Sampler(const SamplingParams& params, int n_vocab);
  ~Sampler();

  // Tokens that count for the repetition penalties (the prompt, then each sampled token).
  void accept(int32_t token);
  // Picks the next token from one row of logits (n_vocab floats). When params.n_probs > 0,
  // *top receives the n most probable candidates of the final distribution, best first.
  // Under a constraint the token is also fed to its matcher; -1 when the constraint allows
  // no token of the vocabulary (the request cannot continue).
  int32_t sample(const float* logits, std::vector<TokenProb>* top = nullptr);
  const constrain::Matcher* matcher() const { return matcher_.get(); }
  // With params.logprobs: the last sampled token's log-probability and the most likely tokens
  // of that step (TokenProb::prob holds a log-probability), best first.
  float last_logprob() const { return last_logprob_; }
  const std::vector<TokenProb>& last_top_logprobs() const { return last_top_; }

 private:
  struct Cand {
    int32_t id;
    float logit;
  };
  void apply_penalties();
  void top_k(int k);
  void typical(float p);
  void top_p(float p);
  void min_p(float p);
  void softmax();  // fills probs_ for cands_ (sorted by logit, descending)
  void sort_desc();
  void report(int n, std::vector<TokenProb>* top);
  bool apply_constraint();  // false: no token allowed
  void note_logprobs();     // the log-softmax normalizer and the top tokens of this step
  int32_t pick(const float* logits, std::vector<TokenProb>* top);

  SamplingParams p_;
  int n_vocab_;
  std::mt19937_64 rng_;
  std::vector<int32_t> history_;
  std::vector<Cand> cands_;
  std::vector<float> probs_;
  std::vector<int32_t> counts_;
  bool sorted_ = false;
  std::unique_ptr<constrain::Matcher> matcher_;
  float lse_ = 0;  // log-sum-exp of the step's logits before temperature
  float last_logprob_ = 0;
  std::vector<TokenProb> last_top_;
};

}  // namespace ds
