// Byte-level BPE training; see bpe_trainer.h. Plain counting over a word-frequency
// table: the training texts are a few KB, so clarity wins over clever data structures.
#include "tools/bpe_trainer.h"

#include <algorithm>
#include <map>
#include <utility>

namespace ds {
namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

enum class CharClass { kLetter, kDigit, kPunct, kNewline, kSpace };

CharClass classify(uint8_t c) {
  if (c == '\n' || c == '\r') return CharClass::kNewline;
  if (c == ' ' || c == '\t' || c == '\f' || c == '\v') return CharClass::kSpace;
  if (c >= '0' && c <= '9') return CharClass::kDigit;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CharClass::kLetter;
  return CharClass::kPunct;
}

// Splits text into words as described in the header.
std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    CharClass c = classify(static_cast<uint8_t>(text[i]));
    if (c == CharClass::kNewline) {
      words.push_back(text.substr(i, 1));
      ++i;
      continue;
    }
    if (text[i] == ' ' && i + 1 < text.size()) {
      const CharClass next = classify(static_cast<uint8_t>(text[i + 1]));
      if (next == CharClass::kLetter || next == CharClass::kDigit || next == CharClass::kPunct) {
        ++i;  // the space joins the following run
        c = next;
      }
    }
    while (i < text.size() && classify(static_cast<uint8_t>(text[i])) == c) ++i;
    if (i == start) ++i;
    words.push_back(text.substr(start, i - start));
  }
  return words;
}

}  // namespace

std::string bpe_byte_token(uint8_t b) {
  // GPT-2 byte-to-unicode: printable bytes keep their code point; the other 68 bytes map,
  // in increasing byte order, to U+0100, U+0101, ...
  auto printable = [](int x) { return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255); };
  if (printable(b)) return utf8(b);
  uint32_t n = 0;
  for (int x = 0; x < b; ++x) n += printable(x) ? 0 : 1;
  return utf8(256 + n);
}

std::string bpe_spell(std::string_view text) {
  std::string s;
  for (char c : text) s += bpe_byte_token(static_cast<uint8_t>(c));
  return s;
}

BpeVocab train_byte_bpe(std::string_view text, int max_merges) {
  BpeVocab v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(bpe_byte_token(static_cast<uint8_t>(b)));

  // word (as a symbol sequence) -> count
  std::map<std::string_view, int> counts;
  for (auto w : split_words(text)) ++counts[w];
  std::vector<std::pair<std::vector<std::string>, int>> words;
  for (const auto& [w, n] : counts) {
    std::vector<std::string> syms;
    for (char c : w) syms.push_back(bpe_byte_token(static_cast<uint8_t>(c)));
    words.emplace_back(std::move(syms), n);
  }

  std::map<std::string, bool> have;
  for (const auto& t : v.tokens) have[t] = true;
  for (int m = 0; m < max_merges; ++m) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [syms, n] : words) {
      for (size_t i = 0; i + 1 < syms.size(); ++i) pairs[{syms[i], syms[i + 1]}] += n;
    }
    const std::pair<std::string, std::string>* best = nullptr;
    int best_n = 1;
    for (const auto& [p, n] : pairs) {
      if (n > best_n) {  // strict: the first (smallest spelling) wins ties
        best_n = n;
        best = &p;
      }
    }
    if (!best) break;
    const auto [left, right] = *best;
    const std::string joined = left + right;
    v.merges.push_back(left + " " + right);
    if (!have[joined]) {
      have[joined] = true;
      v.tokens.push_back(joined);
    }
    for (auto& [syms, n] : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < syms.size(); ++i) {
        if (i + 1 < syms.size() && syms[i] == left && syms[i + 1] == right) {
          out.push_back(joined);
          ++i;
        } else {
          out.push_back(syms[i]);
        }
      }
      syms = std::move(out);
    }
  }
  return v;
}

}  // namespace ds
