// A small byte-level BPE trainer, for the self-made vocabulary of `ds-cli synth` models
// (the demo model of scripts/run.sh). It produces what a GGUF "gpt2" tokenizer holds:
// 256 byte tokens in the GPT-2 byte-to-unicode spelling, then one token per learned merge,
// and the merges as "left right" strings in rank order (../shared/SPEC.md, "Tokenizers").
//
// Training: the text is split into words (an optional leading space followed by a run of
// letters, of digits, or of punctuation; newlines alone; other whitespace runs), and the
// most frequent adjacent symbol pair across all words is merged repeatedly (ties broken by
// the pair's spelling, so the result is deterministic). Merges never cross word borders,
// so they are valid for any pre-tokenizer that splits at least as finely.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds {

struct BpeVocab {
  std::vector<std::string> tokens;  // [0, 256): bytes; then merge results
  std::vector<std::string> merges;  // "left right", rank = index
};

// The GPT-2 byte-level spelling of one byte (UTF-8 of its mapped code point).
std::string bpe_byte_token(uint8_t b);
// Spells raw text in the byte-level alphabet.
std::string bpe_spell(std::string_view text);

// Learns up to max_merges merges (stops early when no pair occurs twice).
BpeVocab train_byte_bpe(std::string_view text, int max_merges);

}  // namespace ds
