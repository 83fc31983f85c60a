// Byte-level BPE merge loop. The symbol list is a doubly linked list in a vector; the queue
// holds (rank, position, left id, right id) candidates and stale ones are skipped on pop by
// checking that the two symbols are still adjacent with the same ids.
#include "text/tokenizer_bpe.h"

#include <algorithm>

#include "text/unicode_utf8.h"
#include "util/scratch.h"

namespace ds {

static size_t table_size(size_t n) {  // power of two, load factor <= 1/2
  size_t cap = 16;
  while (cap < 2 * n) cap <<= 1;
  return cap;
}

uint32_t TokenIndex::hash(std::string_view s) {  // FNV-1a: tokens are short
  uint32_t h = 2166136261u;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return h;
}

void TokenIndex::build(const std::vector<std::string>& tokens, const std::vector<bool>* include) {
  tokens_ = &tokens;
  slots_.assign(table_size(tokens.size()), Slot{0, -1});
  mask_ = static_cast<uint32_t>(slots_.size() - 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (include && !(*include)[i]) continue;
    const uint32_t h = hash(tokens[i]);
    for (uint32_t at = h & mask_;; at = (at + 1) & mask_) {
      Slot& s = slots_[at];
      if (s.id < 0) {
        s = {h, static_cast<int32_t>(i)};
        break;
      }
      if (s.hash == h && tokens[static_cast<size_t>(s.id)] == tokens[i]) break;  // keep the first
    }
  }
}

int32_t TokenIndex::find(std::string_view text) const {
  if (slots_.empty()) return -1;
  const uint32_t h = hash(text);
  for (uint32_t at = h & mask_;; at = (at + 1) & mask_) {
    const Slot& s = slots_[at];
    if (s.id < 0) return -1;
    if (s.hash == h && (*tokens_)[static_cast<size_t>(s.id)] == text) return s.id;
  }
}

Status BpeModel::build(const std::vector<std::string>& tokens, const std::vector<bool>& mergeable,
                       const std::vector<std::string>& merges) {
  vocab_.build(tokens, &mergeable);
  const auto& bl = unicode::byte_level();
  for (int b = 0; b < 256; ++b) byte_id_[b] = lookup(bl.byte_to_utf8[b]);

  merges_.assign(table_size(merges.size()), Merge{});
  merge_mask_ = merges_.size() - 1;
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
    if (a < 0 || b < 0) continue;
    joined.assign(m.substr(0, sp));
    joined.append(m.substr(sp + 1));
    const int32_t r = lookup(joined);
    if (r < 0) continue;
    const uint64_t key = pair_key(a, b);
    for (size_t at = pair_slot(key);; at = (at + 1) & merge_mask_) {
      if (merges_[at].key == key) break;  // an earlier (lower) rank wins
      if (merges_[at].key == kEmpty) {
        merges_[at] = {key, static_cast<int32_t>(rank), r};
        break;
      }
    }
  }
  return Status::ok();
}

const BpeModel::Merge* BpeModel::find_merge(int32_t a, int32_t b) const {
  const uint64_t key = pair_key(a, b);
  for (size_t at = pair_slot(key);; at = (at + 1) & merge_mask_) {
    if (merges_[at].key == key) return &merges_[at];
    if (merges_[at].key == kEmpty) return nullptr;
  }
}

bool BpeModel::spells_every_byte() const {
  for (int32_t id : byte_id_) {
    if (id < 0) return false;
  }
  return true;
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
    const Merge* m = find_merge(a, b);
    if (!m) return;
    queue.push_back({m->rank, pos, a, b, m->result});
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
  release_large_scratch(sym);
  release_large_scratch(queue);
}

}  // namespace ds
