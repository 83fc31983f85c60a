// BlockPool: one NumaBuffer carved into equal blocks, a LIFO free list (recently freed
// blocks are the ones most likely still in cache) and a reference count per block.
// Blocks start on the free list in ascending order so that a fresh pool hands out 0, 1,
// 2, ... which keeps tests and traces readable. A mutex keeps the bookkeeping safe if
// the scheduler and a finishing request touch it from different threads; no call
// allocates except alloc() appending to the caller's vector.
#include "runtime/block_pool.h"

#include <cassert>
#include <mutex>

#include "runtime/numa.h"

namespace ds {

namespace {
constexpr size_t kBlockAlign = 64;  // a cache line: blocks never share one
}  // namespace

struct BlockPool::Impl {
  BlockPoolOptions opts;
  size_t block_bytes = 0;   // usable bytes per block
  size_t block_stride = 0;  // block_bytes rounded up to kBlockAlign
  NumaBuffer memory;
  mutable std::mutex mu;
  std::vector<int32_t> free_list;  // stack; back() is handed out next
  std::vector<int32_t> refs;

  bool valid(int32_t id) const { return id >= 0 && id < opts.n_blocks; }
};

Result<std::unique_ptr<BlockPool>> BlockPool::create(const BlockPoolOptions& opts) {
  if (opts.n_blocks <= 0) {
    return Status::error("KV block pool: n_blocks must be positive, got " + std::to_string(opts.n_blocks));
  }
  if (opts.block_size <= 0) {
    return Status::error("KV block pool: block_size must be positive, got " + std::to_string(opts.block_size));
  }
  if (opts.bytes_per_token == 0) return Status::error("KV block pool: bytes_per_token must be positive");
  auto mode = parse_numa_mode(opts.numa);
  if (!mode) return mode.status();

  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->block_bytes = static_cast<size_t>(opts.block_size) * opts.bytes_per_token;
  impl->block_stride = (impl->block_bytes + kBlockAlign - 1) / kBlockAlign * kBlockAlign;
  const size_t total = impl->block_stride * static_cast<size_t>(opts.n_blocks);
  if (total / static_cast<size_t>(opts.n_blocks) != impl->block_stride) {
    return Status::error("KV block pool: " + std::to_string(opts.n_blocks) + " blocks of " +
                         std::to_string(impl->block_stride) + " bytes overflow the address space");
  }
  auto memory = NumaBuffer::allocate(total, *mode);
  if (!memory) return Status::error("KV block pool: " + memory.message());
  impl->memory = std::move(memory).value();
  impl->refs.assign(opts.n_blocks, 0);
  impl->free_list.reserve(opts.n_blocks);
  for (int32_t id = opts.n_blocks - 1; id >= 0; --id) impl->free_list.push_back(id);

  std::unique_ptr<BlockPool> pool(new BlockPool());
  pool->impl_ = std::move(impl);
  return pool;
}

BlockPool::~BlockPool() = default;

int BlockPool::n_blocks() const {
  return impl_->opts.n_blocks;
}

int BlockPool::n_free() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<int>(impl_->free_list.size());
}

int BlockPool::block_size() const {
  return impl_->opts.block_size;
}

size_t BlockPool::block_bytes() const {
  return impl_->block_bytes;
}

uint8_t* BlockPool::block_data(int32_t id) {
  assert(impl_->valid(id));
  return impl_->memory.data() + static_cast<size_t>(id) * impl_->block_stride;
}

Status BlockPool::alloc(int n, std::vector<int32_t>* out) {
  Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.mu);
  if (n < 0) return Status::error("KV block pool: cannot allocate " + std::to_string(n) + " blocks");
  if (static_cast<size_t>(n) > p.free_list.size()) {
    return Status::error("KV cache full: need " + std::to_string(n) + " blocks of " +
                         std::to_string(p.opts.block_size) + " tokens, " + std::to_string(p.free_list.size()) + " of " +
                         std::to_string(p.opts.n_blocks) + " free (raise --ctx-size or lower --parallel)");
  }
  for (int i = 0; i < n; ++i) {
    const int32_t id = p.free_list.back();
    p.free_list.pop_back();
    p.refs[id] = 1;
    out->push_back(id);
  }
  return Status::ok();
}

void BlockPool::retain(int32_t id) {
  Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.mu);
  const bool live = p.valid(id) && p.refs[id] > 0;
  assert(live && "retain of a free or unknown block");
  if (live) ++p.refs[id];
}

void BlockPool::release(int32_t id) {
  Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.mu);
  const bool live = p.valid(id) && p.refs[id] > 0;
  assert(live && "release of a free or unknown block");
  if (live && --p.refs[id] == 0) p.free_list.push_back(id);
}

int BlockPool::ref_count(int32_t id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->valid(id) ? impl_->refs[id] : 0;
}

}  // namespace ds
