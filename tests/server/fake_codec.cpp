#include "fake_codec.h"

namespace ds::test {

Result<std::vector<int32_t>> FakeCodec::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_bos) out.push_back(256);
  for (size_t i = 0; i < text.size(); ++i) {
    if (parse_special && text.substr(i, 3) == "<s>") {
      out.push_back(256);
      i += 2;
    } else {
      out.push_back(static_cast<unsigned char>(text[i]));
    }
  }
  return out;
}

std::string FakeCodec::token_text(int32_t id) const {
  return id >= 0 && id < 256 ? std::string(1, static_cast<char>(id)) : std::string();
}

std::string FakeCodec::token_bytes(int32_t id) const {
  if (id == 256) return "<s>";
  if (id == 257) return "</s>";
  return token_text(id);
}

Result<std::string> FakeCodec::render_chat(const ChatInput& input) const {
  std::string s = "<s>";
  if (!input.tools.is_null()) s += "<|tools|>" + chat_tojson(input.tools);
  if (input.thinking) s += std::string("<|thinking:") + (*input.thinking ? "on" : "off") + "|>";
  if (input.enable_thinking) s += std::string("<|enable_thinking:") + (*input.enable_thinking ? "on" : "off") + "|>";
  if (input.reasoning_effort) s += "<|effort:" + *input.reasoning_effort + "|>";
  if (!input.response_format.is_null()) s += "<|format|>" + chat_tojson(input.response_format);
  for (const auto& m : input.messages) {
    s += "<|" + m.role + "|>" + m.reasoning_content.value_or("") + m.text();
    for (const auto& c : m.tool_calls) s += "<|call|>" + c.name + " " + chat_tojson(c.arguments);
  }
  if (input.add_generation_prompt) s += "<|assistant|>";
  return s;
}

namespace {
// Minimal splitter for tests: everything up to "</think>" is reasoning.
class FakeReasoning final : public ReasoningFilter {
 public:
  Delta push(std::string_view text) override {
    held_ += text;
    Delta d;
    if (in_reasoning_) {
      const size_t p = held_.find("</think>");
      if (p == std::string::npos) {
        const size_t keep = std::min<size_t>(held_.size(), 7);
        d.reasoning = held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return d;
      }
      d.reasoning = held_.substr(0, p);
      held_.erase(0, p + 8);
      in_reasoning_ = false;
    }
    d.content = held_;
    held_.clear();
    return d;
  }
  Delta flush() override {
    Delta d;
    (in_reasoning_ ? d.reasoning : d.content) = held_;
    held_.clear();
    return d;
  }

 private:
  bool in_reasoning_ = true;
  std::string held_;
};
}  // namespace

std::unique_ptr<ReasoningFilter> FakeCodec::reasoning_filter(std::string_view) const {
  if (!reasoning_) return nullptr;
  return std::make_unique<FakeReasoning>();
}

}  // namespace ds::test
