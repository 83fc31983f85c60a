// Pre-tokenizers (internal): each is a fixed sequence of regex splits named by
// tokenizer.ggml.pre. Every split keeps both the matches and the text between them as pieces
// ("isolated" splitting), and each later regex runs on every piece of the earlier ones on its
// own, so anchors and look-ahead see only that piece. Patterns run on PCRE2 with UTF + UCP
// (Unicode \p{..} classes and \s) and are JIT-compiled once at load.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ds/status.h"

namespace ds {

class PreTokenizer {
 public:
  // Known names (tokenizer.ggml.pre values); an unknown one is an error naming it.
  static const std::vector<std::string>& names();
  static Result<std::unique_ptr<PreTokenizer>> create(std::string_view name);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the words of `text` (valid UTF-8) to `out` as views into `text`.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

  const std::string& name() const { return name_; }
  bool nfc() const { return nfc_; }                      // normalize to NFC first (qwen2)
  bool ignore_merges() const { return ignore_merges_; }  // whole word in vocab wins (llama3)

 private:
  struct Regex;
  PreTokenizer() = default;
  std::string name_;
  bool nfc_ = false;
  bool ignore_merges_ = false;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace ds
