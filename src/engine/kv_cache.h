// The paged KV cache (vLLM-style): a BlockPool of fixed-size blocks, each holding
// block_size tokens of every layer [KV_LAYOUT], and a block table per sequence. Blocks are
// reference counted so full prefix blocks can be shared; a sequence's table only grows
// (seq_reserve) until the sequence is released. Running out of blocks is a Status error
// and takes nothing. Not thread-safe: the engine's owner serializes calls.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "ds/status.h"
#include "runtime/block_pool.h"

namespace ds {

class KvCache {
 public:
  static Result<std::unique_ptr<KvCache>> create(const BlockPoolOptions& opts);

  int block_size() const { return pool_->block_size(); }
  int n_blocks() const { return pool_->n_blocks(); }
  int n_free() const { return pool_->n_free(); }
  size_t block_bytes() const { return pool_->block_bytes(); }

  Status reserve(int32_t seq, int32_t n_tokens);
  void release(int32_t seq);
  std::vector<int32_t> blocks(int32_t seq) const;
  Status adopt(int32_t seq, std::span<const int32_t> block_ids);
  // Appends to seq's table a new block with a copy of block src's bytes.
  Status copy_block(int32_t seq, int32_t src);
  void block_retain(int32_t id) { pool_->retain(id); }
  void block_release(int32_t id) { pool_->release(id); }
  // Positions covered by seq's table (0 for an unknown sequence).
  int64_t capacity(int32_t seq) const;
  // seq's block base pointers (in table order), written to out; returns how many.
  int block_pointers(int32_t seq, const uint8_t** out, int max) const;

 private:
  explicit KvCache(std::unique_ptr<BlockPool> pool) : pool_(std::move(pool)) {}
  std::unique_ptr<BlockPool> pool_;
  std::unordered_map<int32_t, std::vector<int32_t>> tables_;
};

}  // namespace ds
