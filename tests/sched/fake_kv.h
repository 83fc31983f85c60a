// A fake paged KV cache for the scheduler tests: reference-counted blocks whose "contents"
// are the token ids written at each position, so that a test can check that every sequence
// reads exactly its own history through its block table (shared prefix blocks included).
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "sched/kv_blocks.h"

namespace ds::test {

class FakeKv final : public KvBlocks {
 public:
  FakeKv(int n_blocks, int block_size);
  int block_size() const override { return bs_; }
  int blocks_total() const override { return static_cast<int>(ref_.size()); }
  int blocks_free() const override;
  Status seq_reserve(int32_t seq, int32_t n_tokens) override;
  void seq_release(int32_t seq) override;
  std::vector<int32_t> seq_blocks(int32_t seq) const override;
  Status seq_adopt(int32_t seq, std::span<const int32_t> ids) override;
  void block_retain(int32_t id) override { ++ref_.at(id); }
  void block_release(int32_t id) override;
  Status seq_copy_block(int32_t seq, int32_t src) override;

  // The executor side: store tokens at positions (fails the test when writing into a
  // shared block or outside the table), and read a sequence's history back.
  void write(int32_t seq, int32_t pos0, std::span<const int32_t> tokens);
  std::vector<int32_t> read(int32_t seq, int32_t n) const;
  int ref_count(int32_t id) const { return ref_.at(id); }

 private:
  int bs_;
  std::vector<int> ref_;
  std::vector<std::vector<int32_t>> content_;  // [block][bs]
  std::map<int32_t, std::vector<int32_t>> tables_;
};

// The fake model: the next token is a hash of the whole history, so any KV mix-up shows.
int32_t fake_next_token(std::span<const int32_t> history, int n_vocab);

}  // namespace ds::test
