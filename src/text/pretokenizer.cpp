// Pre-tokenizer regexes, from the public tokenizer definitions (each model's tokenizer.json
// "pre_tokenizer" Split patterns, cross-checked with the GGUF ecosystem's vocab code), run on
// PCRE2. PCRE2 with UCP gives the same classes as the reference tokenizers' Oniguruma engine
// (\s includes U+0085 and U+3000; \p{S} includes '~'), which matters for exactness
// (../shared/tokenizer/README.md lists cases where a hand-written matcher went wrong).
// In the deepseek-llm letter class, the canonical singletons U+1F7D, U+1FBE, U+1FD3, U+1FDB,
// U+2126 and U+212A are written as \x{..} escapes: as literal characters any NFC-normalizing
// editor would silently turn them into other letters (and reorder the ranges).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/pretokenizer.h"

#include <pcre2.h>

#include "util/scratch.h"

namespace ds {

namespace {

struct PreSpec {
  const char* name;
  std::vector<const char*> patterns;  // applied in order, each to every piece of the last
  bool nfc;
  bool ignore_merges;
};

// GPT-4-style patterns of Llama 3 and Qwen2 differ only in the digit run length.
#define DS_GPT4_STYLE(DIGITS)                                                 \
  R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})re" DIGITS \
  R"re(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"

const std::vector<PreSpec>& specs() {
  static const std::vector<PreSpec> s = {
      {"deepseek-llm",
       {R"re([\r\n])re",
        R"re(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\x{1F7D}ᾀ-ᾴᾶ-ᾼ\x{1FBE}ῂ-ῄῆ-ῌῐ-\x{1FD3}ῖ-\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\x{2126}ℨ\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)re",
        R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re", R"re(\s+$)re", R"re([一-龥ࠀ-一가-퟿]+)re", R"re(\p{N}+)re"},
       false,
       false},
      {"deepseek-coder",
       {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", R"re([一-龥ࠀ-一가-퟿]+)re", R"re(\p{N})re"},
       false,
       false},
      {"deepseek-v3",
       {R"re(\p{N}{1,3})re", R"re([一-龥぀-ゟ゠-ヿ]+)re",
        R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       false,
       false},
      {"qwen2", {DS_GPT4_STYLE("")}, true, false},
      {"deepseek-r1-qwen", {DS_GPT4_STYLE("")}, true, false},
      {"llama-bpe", {DS_GPT4_STYLE("{1,3}")}, false, true},
  };
  return s;
}

#undef DS_GPT4_STYLE

// Per-thread match scratch: match data and a JIT stack are not shareable between threads.
struct MatchScratch {
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
  pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
  MatchScratch() { pcre2_jit_stack_assign(ctx, nullptr, stack); }
  ~MatchScratch() {
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(md);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Regex() { pcre2_code_free(code); }

  // Appends the matches of this regex in `piece` and the gaps between them.
  void split(std::string_view piece, std::vector<std::string_view>& out) const {
    MatchScratch& s = scratch();
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t last = 0, start = 0;
    while (start < piece.size()) {
      int rc = jit ? pcre2_jit_match(code, subject, piece.size(), start, 0, s.md, s.ctx)
                   : pcre2_match(code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, s.md, s.ctx);
      if (rc < 0) break;  // no further match (or a matching-limit error: keep the rest whole)
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
      const size_t b = ov[0], e = ov[1];
      if (e == b) {  // none of our patterns matches empty; guard anyway: step one character
        start = b + 1;
        while (start < piece.size() && (static_cast<uint8_t>(piece[start]) & 0xC0) == 0x80) ++start;
        continue;
      }
      if (b > last) out.push_back(piece.substr(last, b - last));
      out.push_back(piece.substr(b, e - b));
      last = start = e;
    }
    if (last < piece.size()) out.push_back(piece.substr(last));
  }
};

PreTokenizer::~PreTokenizer() = default;

const std::vector<std::string>& PreTokenizer::names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const auto& s : specs()) v.emplace_back(s.name);
    return v;
  }();
  return n;
}

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::create(std::string_view name) {
  const PreSpec* spec = nullptr;
  for (const auto& s : specs()) {
    if (name == s.name) spec = &s;
  }
  if (!spec) {
    std::string known;
    for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
    return Status::error("unknown pre-tokenizer '" + std::string(name) + "' (tokenizer.ggml.pre); known: " + known +
                         "; force one with the pre-tokenizer override option");
  }
  std::unique_ptr<PreTokenizer> pt(new PreTokenizer());
  pt->name_ = spec->name;
  pt->nfc_ = spec->nfc;
  pt->ignore_merges_ = spec->ignore_merges;
  for (const char* pattern : spec->patterns) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto rx = std::make_unique<Regex>();
    rx->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                             &err_off, nullptr);
    if (!rx->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return Status::error("pre-tokenizer " + pt->name_ + ": regex does not compile at offset " +
                           std::to_string(err_off) + ": " + reinterpret_cast<char*>(msg));
    }
    rx->jit = pcre2_jit_compile(rx->code, PCRE2_JIT_COMPLETE) == 0;
    pt->regexes_.push_back(std::move(rx));
  }
  return pt;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  thread_local std::vector<std::string_view> cur, next;
  cur.clear();
  if (!text.empty()) cur.push_back(text);
  for (const auto& rx : regexes_) {
    next.clear();
    for (std::string_view piece : cur) rx->split(piece, next);
    std::swap(cur, next);
  }
  out.insert(out.end(), cur.begin(), cur.end());
  release_large_scratch(cur);
  release_large_scratch(next);
}

}  // namespace ds
