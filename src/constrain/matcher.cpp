// Grammar matching and token masks; see matcher.h for the design.
#include "constrain/matcher.h"

#include <algorithm>
#include <chrono>
#include <numeric>

namespace ds::constrain {
namespace {

using Kind = Grammar::Kind;

constexpr size_t kCompactAt = 1 << 14;  // arena nodes before a compaction of the committed state

void build_trie(TokenVocab& v, const std::vector<int32_t>& ids, size_t lo, size_t hi, size_t depth, uint32_t node) {
  size_t k = lo;
  v.nodes[node].tok_begin = static_cast<uint32_t>(v.toks.size());
  while (k < hi && v.text[static_cast<size_t>(ids[k])].size() == depth) v.toks.push_back(ids[k++]);
  v.nodes[node].tok_end = static_cast<uint32_t>(v.toks.size());
  struct Group {
    uint8_t b;
    size_t lo, hi;
  };
  std::vector<Group> groups;
  while (k < hi) {
    const auto b = static_cast<uint8_t>(v.text[static_cast<size_t>(ids[k])][depth]);
    size_t e = k;
    while (e < hi && static_cast<uint8_t>(v.text[static_cast<size_t>(ids[e])][depth]) == b) ++e;
    groups.push_back({b, k, e});
    k = e;
  }
  const auto first = static_cast<uint32_t>(v.nodes.size());
  v.nodes[node].child_begin = first;
  v.nodes[node].child_end = first + static_cast<uint32_t>(groups.size());
  for (const Group& gr : groups) {
    v.nodes.emplace_back();
    v.byte.push_back(gr.b);
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    build_trie(v, ids, groups[i].lo, groups[i].hi, depth + 1, first + static_cast<uint32_t>(i));
  }
}

}  // namespace

std::shared_ptr<const TokenVocab> TokenVocab::build(int32_t n_vocab, const std::function<std::string(int32_t)>& text,
                                                    const std::function<bool(int32_t)>& is_eog) {
  auto v = std::make_shared<TokenVocab>();
  v->n_vocab = n_vocab;
  v->text.resize(static_cast<size_t>(n_vocab));
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < n_vocab; ++t) {
    if (is_eog && is_eog(t)) {
      v->eog.push_back(t);
      continue;
    }
    v->text[static_cast<size_t>(t)] = text(t);
    if (v->text[static_cast<size_t>(t)].empty()) continue;
    ids.push_back(t);
    v->max_len = std::max(v->max_len, static_cast<int>(v->text[static_cast<size_t>(t)].size()));
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    const auto& x = v->text[static_cast<size_t>(a)];
    const auto& y = v->text[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  v->nodes.emplace_back();
  v->byte.push_back(0);
  build_trie(*v, ids, 0, ids.size(), 0, 0);
  return v;
}

bool Constraint::cached_mask(const std::string& key, std::vector<uint64_t>* out) const {
  std::lock_guard lk(mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return false;
  *out = it->second;
  return true;
}

void Constraint::store_mask(const std::string& key, const std::vector<uint64_t>& mask) const {
  std::lock_guard lk(mu_);
  if (cache_.size() >= kMaxCachedMasks) cache_.clear();
  cache_.emplace(key, mask);
}

Matcher::Matcher(std::shared_ptr<const Constraint> c) : c_(std::move(c)), g_(c_->grammar()), v_(c_->vocab()) {
  for (uint32_t a : g_.alts[g_.root]) expand(a, -1, heads_);
  level_.resize(static_cast<size_t>(v_.max_len) + 2);
  mask_.assign((static_cast<size_t>(v_.n_vocab) + 63) / 64, 0);
}

bool Matcher::same(int32_t a, int32_t b) const {
  while (a >= 0 && b >= 0) {
    if (a == b) return true;
    if (nodes_[static_cast<size_t>(a)].pos != nodes_[static_cast<size_t>(b)].pos) return false;
    a = nodes_[static_cast<size_t>(a)].parent;
    b = nodes_[static_cast<size_t>(b)].parent;
  }
  return a == b;
}

void Matcher::add(int32_t head, std::vector<int32_t>& out) const {
  for (int32_t h : out) {
    if (same(h, head)) return;
  }
  out.push_back(head);
}

// Pushes every stack that continues at `pos` (below it: `parent`) up to its next terminal.
void Matcher::expand(uint32_t pos, int32_t parent, std::vector<int32_t>& out) {
  const Grammar::Sym s = g_.syms[pos];
  switch (s.kind) {
    case Kind::kEnd:
      if (parent < 0) {
        add(-1, out);
      } else {
        const Node p = nodes_[static_cast<size_t>(parent)];
        expand(p.pos, p.parent, out);
      }
      return;
    case Kind::kTerm: {
      const auto id = static_cast<int32_t>(nodes_.size());
      nodes_.push_back({pos, parent});
      const size_t before = out.size();
      add(id, out);
      if (out.size() == before) nodes_.pop_back();  // a duplicate
      return;
    }
    case Kind::kRef: {
      int32_t cont = parent;
      if (g_.syms[pos + 1].kind != Kind::kEnd) {  // a rule in tail position needs no return node
        cont = static_cast<int32_t>(nodes_.size());
        nodes_.push_back({pos + 1, parent});
      }
      for (uint32_t a : g_.alts[s.arg]) expand(a, cont, out);
      return;
    }
  }
}

void Matcher::advance(const std::vector<int32_t>& heads, uint8_t b, std::vector<int32_t>& out) {
  out.clear();
  for (int32_t h : heads) {
    if (h < 0) continue;
    const Node n = nodes_[static_cast<size_t>(h)];
    if (g_.sets[g_.syms[n.pos].arg].test(b)) expand(n.pos + 1, n.parent, out);
  }
}

bool Matcher::accept_bytes(std::string_view bytes) {
  std::vector<int32_t> cur = heads_, next;
  for (char c : bytes) {
    advance(cur, static_cast<uint8_t>(c), next);
    if (next.empty()) return false;
    cur.swap(next);
  }
  heads_ = std::move(cur);
  if (nodes_.size() > kCompactAt) compact();
  return true;
}

bool Matcher::accept_token(int32_t token) {
  if (token < 0 || token >= v_.n_vocab) return false;
  if (std::find(v_.eog.begin(), v_.eog.end(), token) != v_.eog.end()) return can_end();
  const std::string& t = v_.text[static_cast<size_t>(token)];
  return !t.empty() && accept_bytes(t);
}

bool Matcher::can_end() const {
  return std::find(heads_.begin(), heads_.end(), -1) != heads_.end();
}

bool Matcher::must_end() const {
  return heads_.size() == 1 && heads_[0] == -1;
}

// A canonical name of the stack set: each stack's positions top to bottom, sorted.
std::string Matcher::key() const {
  std::vector<std::string> parts;
  for (int32_t h : heads_) {
    std::string p;
    for (int32_t n = h; n >= 0; n = nodes_[static_cast<size_t>(n)].parent) {
      const uint32_t pos = nodes_[static_cast<size_t>(n)].pos;
      p.append(reinterpret_cast<const char*>(&pos), sizeof pos);
    }
    p.push_back(h < 0 ? 'E' : '|');
    parts.push_back(std::move(p));
  }
  std::sort(parts.begin(), parts.end());
  std::string k;
  for (const auto& p : parts) k += p;
  return k;
}

void Matcher::walk(uint32_t tnode, size_t depth) {
  const std::vector<int32_t>& heads = level_[depth];
  std::bitset<256> ok;
  for (int32_t h : heads) {
    if (h >= 0) ok |= g_.sets[g_.syms[nodes_[static_cast<size_t>(h)].pos].arg];
  }
  if (ok.none()) return;
  const TokenVocab::Node& tn = v_.nodes[tnode];
  for (uint32_t c = tn.child_begin; c < tn.child_end; ++c) {
    const uint8_t b = v_.byte[c];
    if (!ok.test(b)) continue;
    const size_t mark = nodes_.size();
    advance(heads, b, level_[depth + 1]);
    if (!level_[depth + 1].empty()) {
      const TokenVocab::Node& cn = v_.nodes[c];
      for (uint32_t k = cn.tok_begin; k < cn.tok_end; ++k) {
        const auto t = static_cast<uint32_t>(v_.toks[k]);
        mask_[t / 64] |= uint64_t{1} << (t % 64);
      }
      walk(c, depth + 1);
    }
    nodes_.resize(mark);
  }
}

const std::vector<uint64_t>& Matcher::mask() {
  const auto t0 = std::chrono::steady_clock::now();
  ++stats_.masks;
  const std::string k = key();
  if (c_->cached_mask(k, &mask_)) {
    ++stats_.cache_hits;
  } else {
    std::fill(mask_.begin(), mask_.end(), 0);
    level_[0] = heads_;
    walk(0, 0);
    if (can_end()) {
      for (int32_t t : v_.eog) mask_[static_cast<size_t>(t) / 64] |= uint64_t{1} << (t % 64);
    }
    c_->store_mask(k, mask_);
    stats_.miss_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  stats_.mask_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return mask_;
}

// Copies the nodes the current stacks reach into a fresh arena (the committed state grows
// by a few nodes per accepted byte; scratch nodes of mask walks are dropped at once).
void Matcher::compact() {
  std::vector<Node> fresh;
  std::unordered_map<int32_t, int32_t> moved;
  std::function<int32_t(int32_t)> copy = [&](int32_t n) -> int32_t {
    if (n < 0) return n;
    auto it = moved.find(n);
    if (it != moved.end()) return it->second;
    const int32_t parent = copy(nodes_[static_cast<size_t>(n)].parent);
    fresh.push_back({nodes_[static_cast<size_t>(n)].pos, parent});
    const auto id = static_cast<int32_t>(fresh.size() - 1);
    moved.emplace(n, id);
    return id;
  };
  for (int32_t& h : heads_) h = copy(h);
  nodes_ = std::move(fresh);
}

}  // namespace ds::constrain
