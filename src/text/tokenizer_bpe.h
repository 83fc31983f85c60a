// Byte-level BPE merging (internal). A word's bytes become byte-level symbols; adjacent pairs
// merge lowest rank first (ties: leftmost), as the reference BPE does, driven by a priority
// queue of candidate pairs over a linked list of symbols: O(n log n) per word, no rescans.
// Lookups (text -> id, id pair -> merge) use flat open-addressing tables: loading a 130k-token
// vocabulary with 128k merges is dominated by these lookups, and node-based maps were ~3x slower.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ds/status.h"

namespace ds {

// Text -> token id over a subset of a token list (which must outlive the index).
class TokenIndex {
 public:
  void build(const std::vector<std::string>& tokens, const std::vector<bool>* include = nullptr);
  int32_t find(std::string_view text) const;  // -1 when absent; the lowest id wins on duplicates

 private:
  struct Slot {
    uint32_t hash;
    int32_t id;  // -1: empty
  };
  static uint32_t hash(std::string_view s);
  const std::vector<std::string>* tokens_ = nullptr;
  std::vector<Slot> slots_;
  uint32_t mask_ = 0;
};

class BpeModel {
 public:
  // `tokens`: the stored texts (must outlive the model); `mergeable[i]`: token i may be
  // produced by BPE (normal-type tokens; control and user-defined ones are only matched
  // literally). Merges whose parts or result are not mergeable tokens can never fire and are
  // skipped.
  Status build(const std::vector<std::string>& tokens, const std::vector<bool>& mergeable,
               const std::vector<std::string>& merges);

  // Appends the ids of one pre-tokenized word (raw bytes).
  // ignore_merges: a word whose byte-level form is a token is that token (Llama 3).
  void encode_word(std::string_view word, bool ignore_merges, std::vector<int32_t>& out) const;

  // True when every byte has a single-byte token (no input byte is ever dropped).
  bool spells_every_byte() const;

  // Id of the mergeable token with this stored text, or -1.
  int32_t lookup(std::string_view text) const { return vocab_.find(text); }

 private:
  struct Merge {
    uint64_t key = kEmpty;  // left id << 32 | right id
    int32_t rank = 0;
    int32_t result = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t pair_slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & merge_mask_;
  }
  const Merge* find_merge(int32_t a, int32_t b) const;

  TokenIndex vocab_;
  std::vector<Merge> merges_;  // open addressing, linear probing
  size_t merge_mask_ = 0;
  int32_t byte_id_[256] = {};  // token of each single byte's byte-level form, or -1
};

}  // namespace ds
