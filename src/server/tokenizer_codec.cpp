// TokenizerCodec: adapts src/model's Tokenizer, ChatTemplate and ReasoningSplitter to the
// API layer's TextCodec.
#include "server/tokenizer_codec.h"

namespace ds {

namespace {
class SplitterFilter final : public ReasoningFilter {
 public:
  explicit SplitterFilter(bool starts_in_reasoning) : split_(starts_in_reasoning) {}
  Delta push(std::string_view text) override {
    auto d = split_.push(text);
    return {std::move(d.reasoning), std::move(d.content)};
  }
  Delta flush() override {
    auto d = split_.flush();
    return {std::move(d.reasoning), std::move(d.content)};
  }

 private:
  ReasoningSplitter split_;
};
}  // namespace

std::unique_ptr<ReasoningFilter> TokenizerCodec::reasoning_filter(std::string_view prompt) const {
  if (!tmpl_.has_reasoning()) return nullptr;
  return std::make_unique<SplitterFilter>(tmpl_.prompt_opens_reasoning() || ChatTemplate::opens_reasoning(prompt));
}

}  // namespace ds
