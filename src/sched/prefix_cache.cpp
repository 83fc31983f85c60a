// Prefix cache bookkeeping; see prefix_cache.h for the design.
#include "sched/prefix_cache.h"

#include <algorithm>

namespace ds {

PrefixCache::~PrefixCache() {
  for (auto& [hash, e] : map_) kv_.block_release(e.block_id);
}

uint64_t PrefixCache::chain_hash(uint64_t parent, std::span<const int32_t> block_tokens) {
  // FNV-1a over the parent hash and the token ids, finished with a 64-bit mixer
  // (splitmix64's) so that neighbouring prefixes spread over the table.
  uint64_t h = 1469598103934665603ull ^ parent;
  auto feed = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ull;
    }
  };
  feed(parent);
  for (int32_t t : block_tokens) feed(static_cast<uint32_t>(t));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

PrefixCache::Entry* PrefixCache::find(uint64_t parent, uint64_t hash, std::span<const int32_t> block_tokens) {
  auto it = map_.find(hash);
  if (it == map_.end()) return nullptr;
  Entry& e = it->second;
  if (e.parent != parent || !std::equal(e.tokens.begin(), e.tokens.end(), block_tokens.begin(), block_tokens.end())) {
    return nullptr;  // a hash collision: never share a block with other contents
  }
  return &e;
}

void PrefixCache::touch(Entry& e, uint64_t hash) {
  lru_.erase(e.lru_it);
  e.lru_it = lru_.insert(lru_.end(), hash);
}

void PrefixCache::acquire_prefix(std::span<const int32_t> tokens, int max_blocks, std::vector<int32_t>* ids,
                                 std::vector<uint64_t>* hashes) {
  const int bs = kv_.block_size();
  uint64_t parent = 0;
  for (int ib = 0; ib < max_blocks && (ib + 1) * bs <= static_cast<int>(tokens.size()); ++ib) {
    auto blk = tokens.subspan(static_cast<size_t>(ib) * bs, bs);
    const uint64_t h = chain_hash(parent, blk);
    Entry* e = find(parent, h, blk);
    if (!e) break;
    if (e->in_use++ == 0) --n_unused_;
    touch(*e, h);
    ids->push_back(e->block_id);
    hashes->push_back(h);
    parent = h;
  }
}

int PrefixCache::acquire_partial(uint64_t parent, std::span<const int32_t> tokens, int max_tokens, int32_t* block_id,
                                 uint64_t* hash) {
  const size_t limit = std::min(tokens.size(), static_cast<size_t>(std::max(max_tokens, 0)));
  size_t best = 0;
  uint64_t best_hash = 0;
  auto [lo, hi] = children_.equal_range(parent);
  for (auto it = lo; it != hi; ++it) {
    const Entry& e = map_.at(it->second);
    const size_t n = std::min(limit, e.tokens.size());
    const size_t same =
        std::mismatch(e.tokens.begin(), e.tokens.begin() + static_cast<std::ptrdiff_t>(n), tokens.begin()).first -
        e.tokens.begin();
    if (same > best) best = same, best_hash = it->second;
  }
  if (best == 0) return 0;
  Entry& e = map_.at(best_hash);
  if (e.in_use++ == 0) --n_unused_;
  touch(e, best_hash);
  *block_id = e.block_id;
  *hash = best_hash;
  return static_cast<int>(best);
}

bool PrefixCache::insert(uint64_t parent, uint64_t hash, std::span<const int32_t> block_tokens, int32_t block_id) {
  if (map_.count(hash)) return false;
  Entry e{.block_id = block_id,
          .parent = parent,
          .tokens = std::vector<int32_t>(block_tokens.begin(), block_tokens.end()),
          .in_use = 1,
          .lru_it = lru_.insert(lru_.end(), hash)};
  kv_.block_retain(block_id);
  map_.emplace(hash, std::move(e));
  children_.emplace(parent, hash);
  return true;
}

void PrefixCache::release(std::span<const uint64_t> hashes) {
  for (uint64_t h : hashes) {
    auto it = map_.find(h);
    if (it == map_.end()) continue;
    if (--it->second.in_use == 0) ++n_unused_;
  }
}

int PrefixCache::evict(int n) {
  int n_evicted = 0;
  for (auto it = lru_.begin(); it != lru_.end() && n_evicted < n;) {
    auto m = map_.find(*it);
    if (m->second.in_use > 0) {
      ++it;
      continue;
    }
    kv_.block_release(m->second.block_id);
    auto [lo, hi] = children_.equal_range(m->second.parent);
    for (auto c = lo; c != hi; ++c) {
      if (c->second == m->first) {
        children_.erase(c);
        break;
      }
    }
    map_.erase(m);
    it = lru_.erase(it);
    --n_unused_;
    ++n_evicted;
  }
  return n_evicted;
}

}  // namespace ds
