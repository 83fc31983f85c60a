// Byte-level BPE merge loop. The symbol list is a doubly linked list in a vector; the queue
// holds (rank, position, left id, right id) candidates and stale ones are skipped on pop by
// checking that the two symbols are still adjacent with the same ids.
#include "model/tokenizer_bpe.h"

#include <algorithm>

#include "model/unicode_utf8.h"

namespace ds {

Status BpeModel::build(const std::vector<std::string>& tokens, const std::vector<bool>& mergeable,
                       const std::vector<std::string>& merges) {
  vocab_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (mergeable[i]) vocab_.emplace(tokens[i], static_cast<int32_t>(i));  // first one wins
  }
  const auto& bl = unicode::byte_level();
  for (int b = 0; b < 256; ++b) byte_id_[b] = lookup(bl.byte_to_utf8[b]);

  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    std::string_view m = merges[rank];
    const size_t sp = m.find(' ', 1);  // from 1: a left part may itself be a space
    if (sp == std::string_view::npos) {
      return Status::error("tokenizer.ggml.merges[" + std::to_string(rank) + "] = '" + std::string(m) +
                           "' is not 'left right'");
    }
    const int32_t a = lookup(m.substr(0, sp));
    const int32_t b = lookup(m.substr(sp + 1));
    joined.assign(m.substr(0, sp));
    joined.append(m.substr(sp + 1));
    const int32_t r = lookup(joined);
    if (a < 0 || b < 0 || r < 0) continue;
    merges_.emplace(pair_key(a, b), Merge{static_cast<int32_t>(rank), r});  // lowest rank wins
  }
  return Status::ok();
}

int32_t BpeModel::lookup(std::string_view text) const {
  auto it = vocab_.find(text);
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::encode_word(std::string_view word, bool ignore_merges, std::vector<int32_t>& out) const {
  if (ignore_merges) {
    std::string bl;
    unicode::byte_level_encode(word, bl);
    const int32_t id = lookup(bl);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  struct Sym {
    int32_t id;
    int32_t prev, next;
  };
  thread_local std::vector<Sym> sym;
  sym.clear();
  for (char c : word) {
    const int32_t id = byte_id_[static_cast<uint8_t>(c)];
    if (id < 0) continue;  // a byte the vocabulary cannot spell: dropped, as the reference does
    const auto n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, n + 1});
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Cand {
    int32_t rank, pos, left, right, result;
    // std heap functions build a max-heap: "greater" puts the lowest rank, then the
    // leftmost position, on top.
    bool operator<(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Cand> queue;
  queue.clear();
  auto push_pair = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    const int32_t a = sym[pos].id, b = sym[sym[pos].next].id;
    auto it = merges_.find(pair_key(a, b));
    if (it == merges_.end()) return;
    queue.push_back({it->second.rank, pos, a, b, it->second.result});
    std::push_heap(queue.begin(), queue.end());
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push_pair(i);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end());
    const Cand c = queue.back();
    queue.pop_back();
    Sym& left = sym[c.pos];
    if (left.id != c.left || left.next < 0 || sym[left.next].id != c.right) continue;  // stale
    const int32_t right = left.next;
    left.id = c.result;
    left.next = sym[right].next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    sym[right].id = -1;  // dead
    push_pair(left.prev);
    push_pair(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace ds
