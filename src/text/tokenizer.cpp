// Tokenizer glue: loading tokenizer.ggml.* metadata, literal matching of control and
// user-defined tokens, the per-word cache, detokenization and the streaming decoder.
// Pre-tokenization lives in pretokenizer.cpp, BPE merging in tokenizer_bpe.cpp.
#include "ds/tokenizer.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "gguf/gguf_file.h"
#include "text/pretokenizer.h"
#include "text/tokenizer_bpe.h"
#include "text/unicode_utf8.h"
#include "util/scratch.h"

namespace ds {

namespace {

// Byte trie over the texts of tokens matched literally (control and user-defined).
class LiteralTrie {
 public:
  void add(std::string_view text, int32_t id) {
    int32_t node = 0;
    for (char c : text) {
      const auto b = static_cast<uint8_t>(c);
      int32_t child = find_child(node, b);
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[static_cast<size_t>(node)].kids.push_back({b, child});
        nodes_.emplace_back();
      }
      node = child;
    }
    if (nodes_[static_cast<size_t>(node)].token < 0) nodes_[static_cast<size_t>(node)].token = id;
    first_[static_cast<uint8_t>(text[0])] = true;
  }

  bool may_start(char c) const { return first_[static_cast<uint8_t>(c)]; }

  // Longest token at text[pos] that `allowed` accepts: {id, length} or {-1, 0}.
  template <class Allowed>
  std::pair<int32_t, size_t> match(std::string_view text, size_t pos, Allowed allowed) const {
    std::pair<int32_t, size_t> best{-1, 0};
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = find_child(node, static_cast<uint8_t>(text[i]));
      if (node < 0) break;
      const int32_t tok = nodes_[static_cast<size_t>(node)].token;
      if (tok >= 0 && allowed(tok)) best = {tok, i + 1 - pos};
    }
    return best;
  }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> kids;
    int32_t token = -1;
  };
  int32_t find_child(int32_t node, uint8_t b) const {
    for (const auto& [byte, child] : nodes_[static_cast<size_t>(node)].kids) {
      if (byte == b) return child;
    }
    return -1;
  }
  std::vector<Node> nodes_ = std::vector<Node>(1);
  bool first_[256] = {};
};

// Texts of control tokens that end a turn in the DeepSeek/Qwen/Llama families.
constexpr std::string_view kEogTexts[] = {
    "<｜end▁of▁sentence｜>", "<|EOT|>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>",
};

constexpr size_t kMaxCacheWords = 1 << 17;  // bound on the word cache; cleared when exceeded
// Longer words are not cached: real words are short, and a cache entry holds a copy of the
// word, so one megabyte-long "word" would otherwise stay in memory until the cache is cleared.
constexpr size_t kMaxCachedWordBytes = 256;

// Bytes a token stands for: byte-level decoding for ordinary tokens, the raw text for tokens
// matched literally, "<0xHH>" byte tokens as that byte.
std::string compute_token_bytes(const std::string& text, TokenType type) {
  std::string out;
  switch (type) {
    case TokenType::kControl:
    case TokenType::kUserDefined:
    case TokenType::kUnknown:
      return text;
    case TokenType::kByte:
      if (text.size() == 6 && text.starts_with("<0x") && text.back() == '>') {
        return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
      }
      [[fallthrough]];
    default:
      unicode::byte_level_decode(text, out);
      return out;
  }
}

}  // namespace

struct Tokenizer::Impl {
  TokenizerVocab v;
  std::unique_ptr<PreTokenizer> pre;
  BpeModel bpe;
  std::vector<std::string> bytes;  // per token
  std::vector<bool> eog;
  LiteralTrie literals;

  struct WordHash {  // lets the cache be searched with a string_view (no allocation)
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>, WordHash, std::equal_to<>> cache;
  size_t max_bytes_per_token = 0;  // see Tokenizer::max_bytes_per_token

  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void encode_fragment(std::string_view frag, std::vector<int32_t>& out) const;
};

void Tokenizer::Impl::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() <= 1 || word.size() > kMaxCachedWordBytes) {  // single bytes never merge: skip the cache
    bpe.encode_word(word, pre->ignore_merges(), out);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = cache.find(word);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  bpe.encode_word(word, pre->ignore_merges(), out);
  std::vector<int32_t> ids(out.begin() + static_cast<std::ptrdiff_t>(start), out.end());
  std::lock_guard<std::mutex> lock(cache_mu);
  if (cache.size() >= kMaxCacheWords) cache.clear();
  cache.emplace(std::string(word), std::move(ids));
}

void Tokenizer::Impl::encode_fragment(std::string_view frag, std::vector<int32_t>& out) const {
  if (frag.empty()) return;
  std::string normalized;
  if (pre->nfc()) {
    normalized = unicode::nfc(frag);
    frag = normalized;
  }
  thread_local std::vector<std::string_view> words;
  words.clear();
  pre->split(frag, words);
  for (std::string_view w : words) encode_word(w, out);
  release_large_scratch(words);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

static Status check_id(const char* key, int32_t id, size_t n_vocab) {
  if (id < -1 || id >= static_cast<int64_t>(n_vocab)) {
    return Status::error(std::string("tokenizer.ggml.") + key + " = " + std::to_string(id) +
                         " is outside the vocabulary (" + std::to_string(n_vocab) + " tokens)");
  }
  return Status::ok();
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_vocab(TokenizerVocab v, const TokenizerOptions& options) {
  const std::vector<std::string> merges = std::move(v.merges);
  v.merges.clear();
  return build(std::move(v), merges, options);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::build(TokenizerVocab v, const std::vector<std::string>& merges,
                                                    const TokenizerOptions& options) {
  const size_t n = v.tokens.size();
  if (n == 0) return Status::error("tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) return Status::error("tokenizer.ggml.tokens is too long");
  if (v.types.empty()) v.types.assign(n, TokenType::kNormal);
  if (v.types.size() != n) {
    return Status::error("tokenizer.ggml.token_type has " + std::to_string(v.types.size()) +
                         " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  }
  DS_RETURN_IF_ERROR(check_id("bos_token_id", v.bos, n));
  DS_RETURN_IF_ERROR(check_id("eos_token_id", v.eos, n));
  DS_RETURN_IF_ERROR(check_id("eot_token_id", v.eot, n));
  DS_RETURN_IF_ERROR(check_id("padding_token_id", v.pad, n));

  auto impl = std::make_unique<Impl>();
  const std::string pre_name = options.force_pre.empty() ? v.pre : options.force_pre;
  if (pre_name.empty()) {
    return Status::error(
        "no tokenizer.ggml.pre (pre-tokenizer) in the vocabulary; force one (ds-cli --pre NAME), "
        "e.g. deepseek-llm for DeepSeek-LLM/V2, deepseek-v3 for V3/R1");
  }
  auto pre = PreTokenizer::create(pre_name);
  if (!pre) return pre.status();
  impl->pre = std::move(pre).value();
  impl->v = std::move(v);
  const TokenizerVocab& vv = impl->v;

  std::vector<bool> mergeable(n);
  impl->bytes.resize(n);
  impl->eog.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const TokenType t = vv.types[i];
    const auto id = static_cast<int32_t>(i);
    mergeable[i] = t != TokenType::kControl && t != TokenType::kUserDefined;
    impl->bytes[i] = compute_token_bytes(vv.tokens[i], t);
    if ((t == TokenType::kControl || t == TokenType::kUserDefined) && !vv.tokens[i].empty()) {
      impl->literals.add(vv.tokens[i], id);
    }
    if (t == TokenType::kControl || t == TokenType::kUserDefined) {  // deepseek-coder's <|EOT|> is user-defined
      for (std::string_view e : kEogTexts) impl->eog[i] = impl->eog[i] || vv.tokens[i] == e;
    }
  }
  if (vv.eos >= 0) impl->eog[static_cast<size_t>(vv.eos)] = true;
  if (vv.eot >= 0) impl->eog[static_cast<size_t>(vv.eot)] = true;
  DS_RETURN_IF_ERROR(impl->bpe.build(vv.tokens, mergeable, merges));
  if (impl->bpe.spells_every_byte()) {
    size_t longest = 1;
    for (size_t i = 0; i < n; ++i) longest = std::max({longest, impl->bytes[i].size(), vv.tokens[i].size()});
    impl->max_bytes_per_token = longest * (impl->pre->nfc() ? 3 : 1);  // [PROMPT_BYTES]
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

// The strings of an array-of-strings key; a missing or mistyped key is an error naming it.
static Result<const std::vector<std::string>*> string_array(const GgufFile& f, const char* key) {
  const GgufValue* val = f.find(key);
  if (!val) return Status::error(f.path() + ": missing metadata key " + key);
  if (!val->is_array() || val->elem_type != GgufValueType::kString) {
    return Status::error(f.path() + ": metadata key " + key + " must be an array of strings");
  }
  return &val->arr_str;
}

static Status read_vocab(const GgufFile& f, TokenizerVocab& v) {
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) return model.status();
  if (!model.value()) return Status::error(f.path() + ": no tokenizer (tokenizer.ggml.model missing)");
  if (*model.value() != "gpt2") {
    return Status::error(f.path() + ": tokenizer.ggml.model = '" + *model.value() +
                         "' is not supported (only byte-level BPE, 'gpt2')");
  }
  auto tokens = string_array(f, "tokenizer.ggml.tokens");
  if (!tokens) return tokens.status();
  v.tokens = *tokens.value();
  if (const GgufValue* tt = f.find("tokenizer.ggml.token_type")) {
    if (!tt->is_array() || tt->arr_int.size() != tt->array_size()) {
      return Status::error(f.path() + ": tokenizer.ggml.token_type must be an array of integers");
    }
    v.types.clear();
    for (int64_t t : tt->arr_int) {
      v.types.push_back(t >= 0 && t <= 6 ? static_cast<TokenType>(t) : TokenType::kUndefined);
    }
  }
  auto pre = f.get_string_or("tokenizer.ggml.pre", "");
  if (!pre) return pre.status();
  v.pre = pre.value();
  struct IdKey {
    const char* key;
    int32_t* dst;
  };
  for (IdKey k : {IdKey{"tokenizer.ggml.bos_token_id", &v.bos},
                  {"tokenizer.ggml.eos_token_id", &v.eos},
                  {"tokenizer.ggml.eot_token_id", &v.eot},
                  {"tokenizer.ggml.padding_token_id", &v.pad}}) {
    auto id = f.get_int_or(k.key, -1);
    if (!id) return id.status();
    if (id.value() < -1 || id.value() > INT32_MAX) {
      return Status::error(f.path() + ": " + k.key + " = " + std::to_string(id.value()) + " is out of range");
    }
    *k.dst = static_cast<int32_t>(id.value());
  }
  auto add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", true);
  if (!add_bos) return add_bos.status();
  auto add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", false);
  if (!add_eos) return add_eos.status();
  v.add_bos = add_bos.value();
  v.add_eos = add_eos.value();
  return Status::ok();
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file, const TokenizerOptions& options) {
  TokenizerVocab v;
  DS_RETURN_IF_ERROR(read_vocab(file, v));
  auto merges = string_array(file, "tokenizer.ggml.merges");
  if (!merges) return merges.status();
  auto tok = build(std::move(v), *merges.value(), options);
  if (!tok) return Status::error(file.path() + ": " + tok.message());
  return tok;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  if (auto bad = utf8_find_invalid(text)) {
    return Status::error("input text is not valid UTF-8 (byte offset " + std::to_string(*bad) + " of " +
                         std::to_string(text.size()) + ")");
  }
  const Impl& m = *impl_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_bos && m.v.add_bos && m.v.bos >= 0) ids.push_back(m.v.bos);
  auto allowed = [&](int32_t id) {
    return parse_special || m.v.types[static_cast<size_t>(id)] == TokenType::kUserDefined;
  };
  size_t frag_start = 0, pos = 0;
  while (pos < text.size()) {
    if (!m.literals.may_start(text[pos])) {
      ++pos;
      continue;
    }
    const auto [id, len] = m.literals.match(text, pos, allowed);
    if (id < 0) {
      ++pos;
      continue;
    }
    m.encode_fragment(text.substr(frag_start, pos - frag_start), ids);
    ids.push_back(id);
    pos += len;
    frag_start = pos;
  }
  m.encode_fragment(text.substr(frag_start), ids);
  if (add_bos && m.v.add_eos && m.v.eos >= 0) ids.push_back(m.v.eos);
  return ids;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool keep_special) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= n_vocab()) {
      return Status::error("token id " + std::to_string(id) + " (position " + std::to_string(i) +
                           ") is outside the vocabulary [0, " + std::to_string(n_vocab()) + ")");
    }
    if (!keep_special && is_special(id)) continue;
    out += impl_->bytes[static_cast<size_t>(id)];
  }
  return out;
}

std::string_view Tokenizer::piece(int32_t id) const {
  return id >= 0 && id < n_vocab() ? std::string_view(impl_->v.tokens[static_cast<size_t>(id)]) : "";
}

std::string Tokenizer::token_bytes(int32_t id) const {
  return id >= 0 && id < n_vocab() ? impl_->bytes[static_cast<size_t>(id)] : std::string();
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  // A linear scan (about 1 ms for 130k tokens): callers look up a few marker tokens at start-up.
  const auto& t = impl_->v.tokens;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == text) return static_cast<int32_t>(i);
  }
  return std::nullopt;
}

int32_t Tokenizer::bos() const {
  return impl_->v.bos;
}
int32_t Tokenizer::eos() const {
  return impl_->v.eos;
}
int32_t Tokenizer::n_vocab() const {
  return static_cast<int32_t>(impl_->v.tokens.size());
}
bool Tokenizer::add_bos() const {
  return impl_->v.add_bos;
}
const std::string& Tokenizer::pre_name() const {
  return impl_->pre->name();
}
size_t Tokenizer::max_bytes_per_token() const {
  return impl_->max_bytes_per_token;
}

TokenType Tokenizer::type(int32_t id) const {
  return id >= 0 && id < n_vocab() ? impl_->v.types[static_cast<size_t>(id)] : TokenType::kUndefined;
}
bool Tokenizer::is_special(int32_t id) const {
  return type(id) == TokenType::kControl;
}
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->eog[static_cast<size_t>(id)];
}

// Valid UTF-8 in, valid UTF-8 out: each byte that does not start a valid character becomes
// U+FFFD, together with the continuation bytes that follow it.
static void append_sanitized(std::string& out, std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    uint32_t cp = 0;
    const int len = unicode::decode_utf8(s, pos, &cp);
    if (len > 0) {
      out.append(s.substr(pos, static_cast<size_t>(len)));
      pos += static_cast<size_t>(len);
      continue;
    }
    out += "\xEF\xBF\xBD";
    ++pos;
    while (pos < s.size() && (static_cast<uint8_t>(s[pos]) & 0xC0) == 0x80) ++pos;
  }
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool keep_special)
    : tok_(tokenizer), keep_special_(keep_special) {}

std::string StreamDecoder::push(int32_t id) {
  if (id < 0 || id >= tok_.n_vocab() || (!keep_special_ && tok_.is_special(id))) return {};
  pending_ += tok_.token_bytes(id);
  const size_t n = utf8_complete_prefix(pending_);
  std::string out;
  append_sanitized(out, std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  append_sanitized(out, pending_);
  pending_.clear();
  return out;
}

}  // namespace ds
