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

Result<std::string> FakeCodec::render_chat(std::span<const ApiChatMessage> messages, bool add_generation_prompt) const {
  std::string s = "<s>";
  for (const auto& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      return Status::error("unknown role '" + m.role + "'");
    }
    s += "<|" + m.role + "|>" + m.content;
  }
  if (add_generation_prompt) s += "<|assistant|>";
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

std::unique_ptr<ReasoningFilter> FakeCodec::reasoning_filter() const {
  if (!reasoning_) return nullptr;
  return std::make_unique<FakeReasoning>();
}

}  // namespace ds::test
