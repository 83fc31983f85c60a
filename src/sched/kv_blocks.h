// The slice of the paged KV cache that the scheduler needs: block counts, per-sequence
// block tables, and reference-counted sharing of full blocks. ds::Engine provides it
// (EngineKvBlocks below); the scheduler tests provide a fake. Keeping the scheduler on this
// small interface is what lets it stay plain data in, data out (STYLE.md habit 5).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "ds/engine.h"
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

// Forwards to a real Engine.
class EngineKvBlocks final : public KvBlocks {
 public:
  explicit EngineKvBlocks(Engine& e) : e_(e) {}
  int block_size() const override { return e_.kv_block_size(); }
  int blocks_total() const override { return e_.kv_blocks_total(); }
  int blocks_free() const override { return e_.kv_blocks_free(); }
  Status seq_reserve(int32_t s, int32_t n) override { return e_.seq_reserve(s, n); }
  void seq_release(int32_t s) override { e_.seq_release(s); }
  std::vector<int32_t> seq_blocks(int32_t s) const override { return e_.seq_blocks(s); }
  Status seq_adopt(int32_t s, std::span<const int32_t> ids) override { return e_.seq_adopt(s, ids); }
  void block_retain(int32_t id) override { e_.block_retain(id); }
  void block_release(int32_t id) override { e_.block_release(id); }
  Status seq_copy_block(int32_t s, int32_t src) override { return e_.seq_copy_block(s, src); }

 private:
  Engine& e_;
};

}  // namespace ds
