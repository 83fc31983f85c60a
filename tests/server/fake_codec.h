// A byte-level TextCodec for the API tests, matching FakeEngine's vocabulary: token i < 256
// is byte i, 256 is BOS "<s>" and 257 EOS "</s>" (control tokens). The chat format is a
// simple "<|role|>content" rendering (tool calls as "<|call|>name args"); with reasoning on,
// "<think>" ... "</think>" is split off; with a tool-call format, outputs are parsed in it.
#pragma once
#include "server/text_codec.h"

namespace ds::test {

class FakeCodec final : public TextCodec {
 public:
  explicit FakeCodec(bool reasoning = false, ToolCallFormat tools = ToolCallFormat::kNone)
      : reasoning_(reasoning), tools_(tools) {}
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_bos, bool parse_special) const override;
  std::string token_text(int32_t id) const override;
  std::string token_bytes(int32_t id) const override;
  bool is_eog(int32_t id) const override { return id == 257; }
  int32_t n_vocab() const override { return 260; }
  size_t max_bytes_per_token() const override { return 3; }  // "<s>"; every other token is one byte
  Result<std::string> render_chat(const ChatInput& input) const override;
  std::string chat_template_name() const override { return "fake"; }
  ToolCallFormat tool_call_format() const override { return tools_; }
  std::unique_ptr<ReasoningFilter> reasoning_filter(std::string_view prompt) const override;

 private:
  bool reasoning_;
  ToolCallFormat tools_;
};

}  // namespace ds::test
