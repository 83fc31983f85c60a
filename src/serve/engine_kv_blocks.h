// The scheduler's KvBlocks view of a real Engine. It lives above both: the scheduler knows
// only KvBlocks (sched/kv_blocks.h) and the engine knows nothing of the scheduler.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "ds/engine.h"
#include "ds/status.h"
#include "sched/kv_blocks.h"

namespace ds {

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
