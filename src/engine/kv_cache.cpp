// Block tables over the BlockPool. Allocation happens only in reserve()/adopt(), never in
// a forward step.
#include "engine/kv_cache.h"

#include <cstring>
#include <string>

namespace ds {

Result<std::unique_ptr<KvCache>> KvCache::create(const BlockPoolOptions& opts) {
  auto pool = BlockPool::create(opts);
  if (!pool) return pool.status();
  return std::unique_ptr<KvCache>(new KvCache(std::move(*pool)));
}

Status KvCache::reserve(int32_t seq, int32_t n_tokens) {
  if (n_tokens < 0) return Status::error("seq_reserve: negative token count " + std::to_string(n_tokens));
  std::vector<int32_t>& t = tables_[seq];
  const int bs = pool_->block_size();
  const int64_t need = (static_cast<int64_t>(n_tokens) + bs - 1) / bs - static_cast<int64_t>(t.size());
  if (need <= 0) return Status::ok();
  std::vector<int32_t> got;
  Status st = pool_->alloc(static_cast<int>(need), &got);
  if (!st) {
    if (t.empty()) tables_.erase(seq);
    return Status::error("KV cache full: sequence " + std::to_string(seq) + " needs " + std::to_string(need) +
                         " more blocks of " + std::to_string(bs) + " tokens, " + std::to_string(pool_->n_free()) +
                         " free of " + std::to_string(pool_->n_blocks()));
  }
  t.insert(t.end(), got.begin(), got.end());
  return Status::ok();
}

void KvCache::release(int32_t seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  for (int32_t id : it->second) pool_->release(id);
  tables_.erase(it);
}

std::vector<int32_t> KvCache::blocks(int32_t seq) const {
  auto it = tables_.find(seq);
  return it == tables_.end() ? std::vector<int32_t>{} : it->second;
}

Status KvCache::adopt(int32_t seq, std::span<const int32_t> block_ids) {
  auto it = tables_.find(seq);
  if (it != tables_.end() && !it->second.empty()) {
    return Status::error("seq_adopt: sequence " + std::to_string(seq) + " already holds blocks");
  }
  for (int32_t id : block_ids) {
    if (id < 0 || id >= pool_->n_blocks() || pool_->ref_count(id) <= 0) {
      return Status::error("seq_adopt: block " + std::to_string(id) + " is not a live block");
    }
  }
  std::vector<int32_t>& t = tables_[seq];
  for (int32_t id : block_ids) {
    pool_->retain(id);
    t.push_back(id);
  }
  return Status::ok();
}

Status KvCache::copy_block(int32_t seq, int32_t src) {
  if (src < 0 || src >= pool_->n_blocks() || pool_->ref_count(src) <= 0) {
    return Status::error("seq_copy_block: block " + std::to_string(src) + " is not a live block");
  }
  std::vector<int32_t> got;
  if (Status st = pool_->alloc(1, &got); !st) return Status::error("seq_copy_block: " + st.message());
  std::memcpy(pool_->block_data(got[0]), pool_->block_data(src), pool_->block_bytes());
  tables_[seq].push_back(got[0]);
  return Status::ok();
}

int64_t KvCache::capacity(int32_t seq) const {
  auto it = tables_.find(seq);
  return it == tables_.end() ? 0 : static_cast<int64_t>(it->second.size()) * pool_->block_size();
}

int KvCache::block_pointers(int32_t seq, const uint8_t** out, int max) const {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return 0;
  int n = 0;
  for (int32_t id : it->second) {
    if (n == max) break;
    out[n++] = pool_->block_data(id);
  }
  return n;
}

}  // namespace ds
