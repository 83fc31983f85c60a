// The slice of the paged KV cache that the scheduler needs: block counts, per-sequence
// block tables, and reference-counted sharing of full blocks. ds::Engine provides it
// (serve/engine_kv_blocks.h adapts it); the scheduler tests provide a fake. The scheduler sits
// below the engine and never includes it. Keeping the scheduler on this
// small interface is what lets it stay plain data in, data out (STYLE.md habit 5).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "ds/status.h"

namespace ds {

class KvBlocks {
 public:
  virtual ~KvBlocks() = default;
  virtual int block_size() const = 0;
  virtual int blocks_total() const = 0;
  virtual int blocks_free() const = 0;
  virtual Status seq_reserve(int32_t seq_id, int32_t n_tokens) = 0;
  virtual void seq_release(int32_t seq_id) = 0;
  virtual std::vector<int32_t> seq_blocks(int32_t seq_id) const = 0;
  virtual Status seq_adopt(int32_t seq_id, std::span<const int32_t> block_ids) = 0;
  virtual void block_retain(int32_t block_id) = 0;
  virtual void block_release(int32_t block_id) = 0;
  // Append to seq's table a new block holding a copy of block src_block (Engine::seq_copy_block).
  // The default cannot copy, which turns off the reuse of partly matching prefix blocks.
  virtual Status seq_copy_block(int32_t seq_id, int32_t src_block) {
    (void)seq_id, (void)src_block;
    return Status::error("seq_copy_block is not supported");
  }
};

}  // namespace ds
