// TextCodec over the model's real Tokenizer and ChatTemplate (src/model).
#pragma once
#include <memory>

#include "text/chat_template.h"
#include "ds/tokenizer.h"
#include "server/text_codec.h"

namespace ds {

class TokenizerCodec final : public TextCodec {
 public:
  TokenizerCodec(const Tokenizer& tok, ChatTemplate tmpl) : tok_(tok), tmpl_(std::move(tmpl)) {}
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_bos, bool parse_special) const override {
    return tok_.encode(text, add_bos, parse_special);
  }
  // Control tokens (BOS, EOS, ...) add no text to generated output.
  std::string token_text(int32_t id) const override {
    return tok_.is_special(id) ? std::string() : tok_.token_bytes(id);
  }
  std::string token_bytes(int32_t id) const override { return tok_.token_bytes(id); }
  bool is_eog(int32_t id) const override { return tok_.is_eog(id); }
  int32_t n_vocab() const override { return tok_.n_vocab(); }
  size_t max_bytes_per_token() const override { return tok_.max_bytes_per_token(); }
  Result<std::string> render_chat(const ChatInput& input) const override { return tmpl_.render(input); }
  std::string chat_template_name() const override { return tmpl_.name(); }
  ToolCallFormat tool_call_format() const override { return tmpl_.tool_call_format(); }
  std::unique_ptr<ReasoningFilter> reasoning_filter(std::string_view prompt) const override;

 private:
  const Tokenizer& tok_;
  ChatTemplate tmpl_;
};

}  // namespace ds
