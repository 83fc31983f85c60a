// BlockPool: the paged KV cache's memory. n_blocks fixed-size blocks, each holding
// block_size tokens x bytes_per_token, allocated once (through numa.h: hwloc-bound,
// huge pages where allowed) and handed out by id with reference counts so that full
// prefix blocks can be shared between sequences. Plain bookkeeping, no model knowledge.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ds/status.h"

namespace ds {

struct BlockPoolOptions {
  int n_blocks = 0;
  int block_size = 16;         // tokens per block
  size_t bytes_per_token = 0;  // all layers of one token's K/V (or MLA latent) rows
  std::string numa = "none";   // distribute | isolate | none
};

class BlockPool {
 public:
  static Result<std::unique_ptr<BlockPool>> create(const BlockPoolOptions& opts);
  ~BlockPool();

  int n_blocks() const;
  int n_free() const;
  int block_size() const;
  size_t block_bytes() const;
  uint8_t* block_data(int32_t id);

  // Takes n free blocks (refcount 1 each) or fails without taking any.
  Status alloc(int n, std::vector<int32_t>* out);
  void retain(int32_t id);
  void release(int32_t id);  // frees the block when its count reaches zero
  int ref_count(int32_t id) const;

 private:
  BlockPool() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds
