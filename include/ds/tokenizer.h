// Tokenizer: exact byte-level BPE for every DeepSeek GGUF (tokenizer.ggml.model = gpt2).
//
// Design: text -> (1) literal special/user-defined tokens, leftmost-longest, matched on the raw
// text -> (2) per remaining fragment: optional NFC (qwen2 family) and the pre-tokenizer named by
// tokenizer.ggml.pre (a fixed sequence of PCRE2 regex splits, ../shared/SPEC.md "Tokenizers")
// -> (3) each word mapped byte -> printable code point and merged by BPE rank with a priority
// queue, results cached per word. Detokenization maps pieces back to bytes; StreamDecoder holds
// back bytes until a UTF-8 character completes. The object is immutable after load except for
// the internal word cache (mutex-guarded), so one Tokenizer serves many threads.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ds/status.h"

namespace ds {

class GgufFile;

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct TokenizerOptions {
  // Pre-tokenizer to use instead of tokenizer.ggml.pre ("" = the file's value). Names:
  // deepseek-llm, deepseek-coder, deepseek-v3, qwen2, deepseek-r1-qwen, llama-bpe.
  std::string force_pre;
};

// Everything a Tokenizer is built from (what from_gguf reads out of the metadata). Public so
// tests and tools can build small vocabularies without a file.
struct TokenizerVocab {
  std::vector<std::string> tokens;                 // token text as stored (byte-level encoded for normal tokens)
  std::vector<TokenType> types;                    // same length as tokens (empty: all NORMAL)
  std::vector<std::string> merges;                 // "left right"; rank = index
  std::string pre = "deepseek-v3";                 // tokenizer.ggml.pre
  int32_t bos = -1, eos = -1, eot = -1, pad = -1;  // -1: none
  bool add_bos = true;                             // tokenizer.ggml.add_bos_token (default true for gpt2)
  bool add_eos = false;                            // tokenizer.ggml.add_eos_token
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* from the file. Errors name the key and value: a model other than
  // gpt2, an unknown pre-tokenizer (unless options.force_pre), inconsistent array lengths.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file, const TokenizerOptions& options = {});
  static Result<std::unique_ptr<Tokenizer>> from_vocab(TokenizerVocab vocab, const TokenizerOptions& options = {});
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Text (UTF-8; invalid UTF-8 is an error naming the byte offset) -> ids.
  // add_bos: add the special tokens the model asks for: BOS first when add_bos_token (default
  //   true), EOS last when add_eos_token. Chat-rendered text already starts with the BOS text:
  //   encode it with add_bos = false.
  // parse_special: control tokens written literally in the text become those tokens; off, they
  //   are tokenized as plain text. User-defined tokens are always matched literally (as the
  //   reference tokenizers do for non-special added tokens).
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_bos, bool parse_special = true) const;

  // Ids -> bytes (the concatenation may be invalid UTF-8 for arbitrary id sequences).
  // keep_special = false drops control tokens (BOS, EOS, ...). Out-of-range ids are an error.
  Result<std::string> decode(std::span<const int32_t> ids, bool keep_special = true) const;

  // The token's text as stored in the vocabulary (byte-level encoded for normal tokens);
  // "" for an out-of-range id.
  std::string_view piece(int32_t id) const;
  // The exact bytes one token stands for ("" for out-of-range ids).
  std::string token_bytes(int32_t id) const;
  // Id of the token whose stored text is exactly `text` (e.g. "<think>"), if any.
  std::optional<int32_t> find_token(std::string_view text) const;

  int32_t bos() const;  // -1 when the file has none
  int32_t eos() const;
  int32_t n_vocab() const;
  bool add_bos() const;
  TokenType type(int32_t id) const;   // UNDEFINED for out-of-range ids
  bool is_special(int32_t id) const;  // control token
  bool is_eog(int32_t id) const;      // ends generation: EOS, EOT, <|im_end|>, <|EOT|>, ...
  const std::string& pre_name() const;
  // [PROMPT_BYTES] Most bytes of input text one token can stand for: the longest token (as
  // bytes or as the literal text of a control token), times 3 when the pre-tokenizer applies
  // NFC (composition shrinks text at most 3:1, a Hangul L+V+T sequence of 9 bytes to one
  // 3-byte syllable). A text of N bytes therefore encodes to at least N / this many tokens,
  // which lets the server reject a prompt that must exceed the context before tokenizing it.
  // 0 when the vocabulary cannot spell every byte (such bytes are dropped, so no bound holds).
  size_t max_bytes_per_token() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  // `merges` is passed apart from `vocab` so that from_gguf need not copy the file's list.
  static Result<std::unique_ptr<Tokenizer>> build(TokenizerVocab vocab, const std::vector<std::string>& merges,
                                                  const TokenizerOptions& options);
  std::unique_ptr<Impl> impl_;
};

// Incremental detokenizer for streaming: push() returns only complete UTF-8 characters and
// holds back the bytes of a character that is not finished yet. Bytes that can never form a
// valid character come out as U+FFFD, so everything returned is valid UTF-8. Ids out of range
// are ignored (the engine only produces valid ids).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool keep_special = true);
  std::string push(int32_t id);
  std::string flush();  // whatever is held back (an unfinished character becomes U+FFFD)

 private:
  const Tokenizer& tok_;
  bool keep_special_;
  std::string pending_;
};

// UTF-8 helpers shared by the tokenizer, the chat code and the server.
// The byte offset of the first invalid sequence, or nullopt when `s` is valid UTF-8.
std::optional<size_t> utf8_find_invalid(std::string_view s);
// Length of the longest prefix of `s` that ends on a character boundary and contains only
// complete characters (the tail that could still become a character is excluded).
size_t utf8_complete_prefix(std::string_view s);

}  // namespace ds
