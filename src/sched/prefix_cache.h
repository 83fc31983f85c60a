// Prefix cache: full KV blocks keyed by their content. Block i of a sequence is identified
// by a hash chain h_i = mix(h_{i-1}, tokens[i*bs, (i+1)*bs)), so equal keys mean equal tokens
// at equal positions with equal history (the entry also keeps its tokens and parent hash, so a
// hash collision can never share a wrong block). The cache holds one reference on each block
// it lists (KvBlocks::block_retain); sequences that adopt or register a block mark the entry
// in use. Entries no live sequence uses are evicted least recently used first, which frees
// the block once the cache's reference is the last one.
#pragma once
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "sched/kv_blocks.h"

namespace ds {

class PrefixCache {
 public:
  explicit PrefixCache(KvBlocks& kv) : kv_(kv) {}
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  static uint64_t chain_hash(uint64_t parent, std::span<const int32_t> block_tokens);

  // Longest run of cached blocks that starts the token sequence, at most max_blocks long.
  // Returns their block ids and hashes; marks them in use and most recently used.
  void acquire_prefix(std::span<const int32_t> tokens, int max_blocks, std::vector<int32_t>* ids,
                      std::vector<uint64_t>* hashes);
  // The cached block that follows `parent` (0: the first block) whose leading tokens match
  // `tokens` longest, counting at most max_tokens. Returns how many match (0: none, and
  // nothing is acquired); otherwise marks the entry in use and sets its block id and hash,
  // which the caller releases once it has copied the block's matching rows.
  int acquire_partial(uint64_t parent, std::span<const int32_t> tokens, int max_tokens, int32_t* block_id,
                      uint64_t* hash);
  // Offer a sequence's just-completed full block. Returns true when the cache now lists it
  // (and the caller's sequence uses it); false when an equal block was already cached.
  bool insert(uint64_t parent, uint64_t hash, std::span<const int32_t> block_tokens, int32_t block_id);
  // A sequence stops using these entries (finished, cancelled or preempted).
  void release(std::span<const uint64_t> hashes);
  // Evict unused entries (LRU first) until at least n blocks were released or none is left.
  // Returns the number of entries evicted.
  int evict(int n);
  int n_evictable() const { return n_unused_; }
  int size() const { return static_cast<int>(map_.size()); }

 private:
  struct Entry {
    int32_t block_id;
    uint64_t parent;
    std::vector<int32_t> tokens;
    int in_use = 0;
    std::list<uint64_t>::iterator lru_it;
  };
  Entry* find(uint64_t parent, uint64_t hash, std::span<const int32_t> block_tokens);
  void touch(Entry& e, uint64_t hash);

  KvBlocks& kv_;
  std::unordered_map<uint64_t, Entry> map_;
  std::unordered_multimap<uint64_t, uint64_t> children_;  // parent hash -> hashes of its cached next blocks
  std::list<uint64_t> lru_;                               // front: least recently used
  int n_unused_ = 0;
};

}  // namespace ds
