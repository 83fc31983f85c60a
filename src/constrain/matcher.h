// Incremental grammar matching against token bytes, and the token masks the sampler applies.
//
// State: the set of parse stacks of a pushdown recognizer over Grammar (the method of
// llama.cpp's grammar sampler, on bytes). Each stack is a chain of positions in
// Grammar::syms whose top is a terminal; an empty stack means the grammar may end here.
// Stacks live in an arena as (position, parent) nodes, so extending one is O(1) and stacks
// share their tails.
//
// Masks: the vocabulary is a byte trie (TokenVocab, built once per vocabulary). A mask walks
// the trie depth first, advancing the stack set one byte per edge and cutting every subtree
// whose prefix the grammar rejects, so tokens that share a prefix share the work. Masks are
// cached per stack set in the Constraint (shared by all requests with the same grammar):
// inside a JSON string or a number the stack set repeats from token to token, and repeated
// requests with one schema reuse each other's masks.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "constrain/grammar.h"

namespace ds::constrain {

// The vocabulary as a byte trie. Tokens with no text (control tokens) are not in the trie:
// under a constraint only EOG tokens of them are ever allowed, where the grammar may end.
struct TokenVocab {
  struct Node {
    uint32_t child_begin = 0, child_end = 0;  // children: nodes [child_begin, child_end)
    uint32_t tok_begin = 0, tok_end = 0;      // tokens ending here: toks[tok_begin, tok_end)
  };
  int32_t n_vocab = 0;
  std::vector<std::string> text;  // token id -> bytes
  std::vector<int32_t> eog;       // end-of-generation token ids
  std::vector<Node> nodes;        // nodes[0] is the root
  std::vector<uint8_t> byte;      // node id -> the byte on the edge into it
  std::vector<int32_t> toks;
  int max_len = 0;

  static std::shared_ptr<const TokenVocab> build(int32_t n_vocab, const std::function<std::string(int32_t)>& text,
                                                 const std::function<bool(int32_t)>& is_eog);
};

// A compiled grammar bound to a vocabulary, with the mask cache its matchers share.
class Constraint {
 public:
  Constraint(Grammar g, std::shared_ptr<const TokenVocab> vocab) : g_(std::move(g)), vocab_(std::move(vocab)) {}
  const Grammar& grammar() const { return g_; }
  const TokenVocab& vocab() const { return *vocab_; }

  bool cached_mask(const std::string& key, std::vector<uint64_t>* out) const;
  void store_mask(const std::string& key, const std::vector<uint64_t>& mask) const;

 private:
  static constexpr size_t kMaxCachedMasks = 1024;  // ~4 KB each at 32k tokens, 19 KB at 152k
  Grammar g_;
  std::shared_ptr<const TokenVocab> vocab_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::vector<uint64_t>> cache_;
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Constraint> c);

  // Advances by these bytes; false (state unchanged) when the grammar rejects them.
  bool accept_bytes(std::string_view bytes);
  // A sampled token: its bytes, or for an EOG token whether the grammar may end.
  bool accept_token(int32_t token);
  bool can_end() const;   // the grammar may end here
  bool must_end() const;  // and nothing else may follow
  // Bit t of word t/64 is set when token t may come next.
  const std::vector<uint64_t>& mask();

  struct Stats {
    int64_t masks = 0, cache_hits = 0;
    double mask_ms = 0;  // time spent on masks (cache misses and hits)
    double miss_ms = 0;  // of which on trie walks (cache misses)
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Node {
    uint32_t pos;
    int32_t parent;
  };
  void expand(uint32_t pos, int32_t parent, std::vector<int32_t>& out);
  void add(int32_t head, std::vector<int32_t>& out) const;
  bool same(int32_t a, int32_t b) const;
  void advance(const std::vector<int32_t>& heads, uint8_t b, std::vector<int32_t>& out);
  void walk(uint32_t tnode, size_t depth);
  std::string key() const;
  void compact();

  std::shared_ptr<const Constraint> c_;
  const Grammar& g_;
  const TokenVocab& v_;
  std::vector<Node> nodes_;
  std::vector<int32_t> heads_;
  std::vector<std::vector<int32_t>> level_;  // scratch stack sets, one per trie depth
  std::vector<uint64_t> mask_;
  Stats stats_;
};

}  // namespace ds::constrain
