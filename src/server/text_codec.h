// What the API layer needs from the model's text side: tokenize, the bytes of each token,
// chat rendering and R1-style reasoning splitting. The server runs on TokenizerCodec (the
// real Tokenizer and ChatTemplate, tokenizer_codec.cpp); the API tests run on a byte-level
// fake, so that the HTTP semantics are tested without a model.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ds/status.h"
#include "text/chat_input.h"
#include "text/tool_call_parser.h"

namespace ds {

namespace constrain {
struct TokenVocab;
}  // namespace constrain

// Splits streamed text into reasoning (<think>...</think>) and content.
class ReasoningFilter {
 public:
  struct Delta {
    std::string reasoning;
    std::string content;
  };
  virtual ~ReasoningFilter() = default;
  virtual Delta push(std::string_view text) = 0;
  virtual Delta flush() = 0;
};

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  // add_bos: the model's own BOS policy applies (text prompts); parse_special: control
  // tokens written in the text become tokens.
  virtual Result<std::vector<int32_t>> encode(std::string_view text, bool add_bos, bool parse_special) const = 0;
  // The bytes a token adds to generated text ("" for control tokens such as BOS/EOS).
  virtual std::string token_text(int32_t id) const = 0;
  // The bytes of a token including control tokens (for /tokenize pieces, /detokenize).
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual bool is_eog(int32_t id) const = 0;
  virtual int32_t n_vocab() const = 0;
  // Most input bytes one token can stand for, so that a text of N bytes is at least
  // N / max_bytes_per_token() tokens; 0 when no such bound holds.
  virtual size_t max_bytes_per_token() const = 0;
  // Chat rendering with the model's (or --chat-template's) format.
  virtual Result<std::string> render_chat(const ChatInput& input) const = 0;
  virtual std::string chat_template_name() const = 0;
  // How the chat format writes tool calls (NONE: it has none).
  virtual ToolCallFormat tool_call_format() const = 0;
  // The splitter for the output after `prompt` (it knows whether the prompt opened the
  // reasoning); nullptr when the chat format has no reasoning section.
  virtual std::unique_ptr<ReasoningFilter> reasoning_filter(std::string_view prompt) const = 0;

  // The vocabulary as the output-constraint engine reads it (token_text of every token, the
  // EOG tokens), built on first use (api_constrain.cpp).
  std::shared_ptr<const constrain::TokenVocab> constraint_vocab() const;

 private:
  mutable std::once_flag vocab_once_;
  mutable std::shared_ptr<const constrain::TokenVocab> vocab_;
};

}  // namespace ds
