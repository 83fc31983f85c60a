// A fake ds::Engine for the engine-loop and API tests: a real paged block table with
// reference counts (so the prefix cache and preemption run for real), and a "model" whose
// logits depend on the whole history read back through the block table. Tokens 0..255 are
// bytes, 256 is BOS, 257 is EOS. The model writes lowercase words and sometimes a two-byte
// "é" (0xC3 0xA9) so that streaming must keep UTF-8 characters whole.
#pragma once
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ds/engine.h"

namespace ds::test {

constexpr int32_t kFakeBos = 256;
constexpr int32_t kFakeEos = 257;
constexpr int kFakeVocab = 260;

struct FakeEngineOptions {
  int n_ctx = 512;
  int n_blocks = 256;
  int block_size = 16;
  int eos_percent = 2;  // chance of EOS per generated token
  std::chrono::microseconds step_delay{0};
  // When set, the model writes this text (then EOS) after the last "<|assistant|>" of the
  // history, continuing wherever the prompt already wrote part of it (a prefill).
  std::string script{};
};

class FakeEngine final : public Engine {
 public:
  explicit FakeEngine(FakeEngineOptions o = {});
  const ModelInfo& info() const override { return info_; }
  const Tokenizer& tokenizer() const override;  // never used by the loop: aborts
  int n_ctx() const override { return o_.n_ctx; }
  int kv_block_size() const override { return o_.block_size; }
  int kv_blocks_total() const override { return o_.n_blocks; }
  int kv_blocks_free() const override;
  Status seq_reserve(int32_t seq_id, int32_t n_tokens) override;
  void seq_release(int32_t seq_id) override;
  std::vector<int32_t> seq_blocks(int32_t seq_id) const override;
  Status seq_adopt(int32_t seq_id, std::span<const int32_t> block_ids) override;
  void block_retain(int32_t block_id) override;
  void block_release(int32_t block_id) override;
  Status seq_copy_block(int32_t seq_id, int32_t src_block) override;
  Status step(std::span<const SeqChunk> chunks, float* logits) override;

  // The model as a function of the history: the logits row after `history`.
  static void model_logits(std::span<const int32_t> history, int eos_percent, float* row);
  static void script_logits(std::span<const int32_t> history, const std::string& script, float* row);
  // What greedy decoding produces after `prompt`, at most n tokens, stopping at EOS.
  static std::vector<int32_t> greedy(std::vector<int32_t> prompt, int n, int eos_percent);

  std::atomic<int64_t> tokens_computed{0};
  std::atomic<bool> fail_next_step{false};

 private:
  FakeEngineOptions o_;
  ModelInfo info_;
  mutable std::mutex mu_;
  std::vector<int> ref_;
  std::vector<std::vector<int32_t>> content_;
  std::map<int32_t, std::vector<int32_t>> tables_;
};

}  // namespace ds::test
