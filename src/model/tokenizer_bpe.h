// Byte-level BPE merging (internal). A word's bytes become byte-level symbols; adjacent pairs
// merge lowest rank first (ties: leftmost), as the reference BPE does, driven by a priority
// queue of candidate pairs over a linked list of symbols: O(n log n) per word, no rescans.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ds/status.h"

namespace ds {

class BpeModel {
 public:
  // `tokens`: the stored texts; `mergeable[i]`: token i may be produced by BPE (normal-type
  // tokens; control and user-defined ones are only matched literally). Merges whose parts or
  // result are not mergeable tokens are ignored (they can never fire).
  Status build(const std::vector<std::string>& tokens, const std::vector<bool>& mergeable,
               const std::vector<std::string>& merges);

  // Appends the ids of one pre-tokenized word (raw bytes).
  // ignore_merges: a word whose byte-level form is a token is that token (Llama 3).
  void encode_word(std::string_view word, bool ignore_merges, std::vector<int32_t>& out) const;

  // Id of the mergeable token with this stored text, or -1.
  int32_t lookup(std::string_view text) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  std::unordered_map<std::string_view, int32_t> vocab_;  // views into the owner's tokens
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t byte_id_[256] = {};  // token of each single byte's byte-level form, or -1
};

}  // namespace ds
