// Built-in chat formats. Each renderer writes exactly what the model's published Jinja
// template produces for plain system/user/assistant conversations (../shared/SPEC.md "Chat
// formats"); tool calls are not supported. Recognition looks for substrings that only one
// family's template contains, checked from the most specific to the most generic.
#include "model/chat_template.h"

#include <algorithm>

#include "gguf/gguf_file.h"
#include "model/tokenizer.h"

namespace ds {

namespace {

constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
// deepseek-coder instruct's system preamble when the conversation has no system message.
constexpr std::string_view kCoderPreamble =
    "You are an AI programming assistant, utilizing the Deepseek Coder model, developed by "
    "Deepseek Company, and you only answer questions related to computer science. For "
    "politically sensitive questions, security and privacy issues, and other non-computer "
    "science questions, you will refuse to answer\n";

struct NamedFormat {
  const char* name;
  ChatFormat format;
};
constexpr NamedFormat kNames[] = {
    {"deepseek3", ChatFormat::DEEPSEEK3},           {"deepseek-r1", ChatFormat::DEEPSEEK_R1},
    {"deepseek2", ChatFormat::DEEPSEEK2},           {"deepseek-llm", ChatFormat::DEEPSEEK2},
    {"deepseek-coder", ChatFormat::DEEPSEEK_CODER}, {"chatml", ChatFormat::CHATML},
};

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

std::string names_list() {
  std::string s;
  for (const auto& n : ChatTemplate::names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// R1 templates drop the reasoning of earlier assistant turns: only text after "</think>".
std::string_view strip_reasoning(std::string_view content) {
  const size_t at = content.rfind(kThinkClose);
  return at == std::string_view::npos ? content : content.substr(at + kThinkClose.size());
}

// A ChatML template's built-in system prompt: the literal text after
// '<|im_start|>system\n' (escaped newline inside a Jinja string) up to '<|im_end|>'.
std::string chatml_default_system(std::string_view tmpl) {
  constexpr std::string_view open = "<|im_start|>system\\n";
  for (size_t at = tmpl.find(open); at != std::string_view::npos; at = tmpl.find(open, at + 1)) {
    const size_t start = at + open.size();
    const size_t end = tmpl.find("<|im_end|>", start);
    if (end == std::string_view::npos) break;
    std::string_view text = tmpl.substr(start, end - start);
    if (!text.empty() && text.find_first_of("'\"+{}") == std::string_view::npos) return std::string(text);
  }
  return "";
}

}  // namespace

const std::vector<std::string>& ChatTemplate::names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const auto& f : kNames) v.emplace_back(f.name);
    return v;
  }();
  return n;
}

Result<ChatFormat> ChatTemplate::recognize(std::string_view t) {
  if (contains(t, kAssistant) && contains(t, kUser)) {
    return contains(t, kThinkOpen) || contains(t, kThinkClose) ? ChatFormat::DEEPSEEK_R1 : ChatFormat::DEEPSEEK3;
  }
  if (contains(t, "### Instruction:") && contains(t, "### Response:")) return ChatFormat::DEEPSEEK_CODER;
  if (contains(t, "<|im_start|>") && contains(t, "<|im_end|>")) return ChatFormat::CHATML;
  if (contains(t, "User: ") && contains(t, "Assistant:")) return ChatFormat::DEEPSEEK2;
  return Status::error(
      "unrecognized chat template (tokenizer.chat_template); choose a built-in "
      "format with --chat-template NAME, one of: " +
      names_list());
}

Result<ChatTemplate> ChatTemplate::from_name(std::string_view name, std::string bos_text, std::string eos_text) {
  for (const auto& f : kNames) {
    if (name == f.name) return ChatTemplate(f.format, std::move(bos_text), std::move(eos_text));
  }
  return Status::error("unknown chat template '" + std::string(name) + "'; built-in: " + names_list());
}

Result<ChatTemplate> ChatTemplate::from_gguf(const GgufFile& file, const Tokenizer& tok,
                                             std::string_view override_name) {
  std::string bos = tok.bos() >= 0 ? std::string(tok.piece(tok.bos())) : "";
  std::string eos = tok.eos() >= 0 ? std::string(tok.piece(tok.eos())) : "";
  if (!override_name.empty()) return from_name(override_name, std::move(bos), std::move(eos));
  auto text = file.get_string("tokenizer.chat_template");
  if (!text) return text.status();
  // DeepSeek-V3.2 speaks the V3 chat format; a deepseek32 file whose template is absent or
  // not recognized gets deepseek3 rather than an error.
  const bool v32 = file.architecture() == "deepseek32";
  if (v32 && (!text.value() || !recognize(*text.value()))) return ChatTemplate(ChatFormat::DEEPSEEK3, std::move(bos), std::move(eos));
  if (!text.value()) {
    return Status::error(file.path() +
                         " has no tokenizer.chat_template; choose one with "
                         "--chat-template NAME, one of: " +
                         names_list());
  }
  auto format = recognize(*text.value());
  if (!format) return Status::error(file.path() + ": " + format.message());
  ChatTemplate t(format.value(), std::move(bos), std::move(eos));
  if (t.format() == ChatFormat::CHATML) t.set_default_system(chatml_default_system(*text.value()));
  return t;
}

ChatTemplate::ChatTemplate(ChatFormat format, std::string bos_text, std::string eos_text)
    : format_(format), bos_(std::move(bos_text)), eos_(std::move(eos_text)) {}

const char* ChatTemplate::name() const {
  for (const auto& f : kNames) {
    if (f.format == format_) return f.name;
  }
  return "?";
}

namespace {

using Messages = std::span<const ChatMessage>;

// <bos>{system}<｜User｜>{user}<｜Assistant｜>{assistant}<eos>...; all system prompts go first,
// joined by a blank line. R1: earlier answers lose their reasoning, and the generation prompt
// opens it ("<think>\n").
std::string render_deepseek3(Messages messages, const std::string& bos, const std::string& eos, bool r1, bool gen) {
  std::string system;
  for (const auto& m : messages) {
    if (m.role == "system") system += (system.empty() ? "" : "\n\n") + m.content;
  }
  std::string out = bos + system;
  for (const auto& m : messages) {
    if (m.role == "user") {
      out += kUser;
      out += m.content;
    } else if (m.role == "assistant") {
      out += kAssistant;
      out += r1 ? strip_reasoning(m.content) : std::string_view(m.content);
      out += eos;
    }
  }
  if (gen) out += std::string(kAssistant) + (r1 ? "<think>\n" : "");
  return out;
}

// <bos>{system}\n\nUser: {user}\n\nAssistant: {assistant}<eos>...; generation: "Assistant:".
std::string render_deepseek2(Messages messages, const std::string& bos, const std::string& eos, bool gen) {
  std::string out = bos;
  for (const auto& m : messages) {
    if (m.role == "system") out += m.content + "\n\n";
    if (m.role == "user") out += "User: " + m.content + "\n\n";
    if (m.role == "assistant") out += "Assistant: " + m.content + eos;
  }
  if (gen) out += "Assistant:";
  return out;
}

// <bos>{preamble or system}### Instruction:\n{user}\n### Response:\n{assistant}\n<|EOT|>\n...
std::string render_deepseek_coder(Messages messages, const std::string& bos, bool gen) {
  const bool has_system =
      std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) { return m.role == "system"; });
  std::string out = bos;
  if (!has_system) out += kCoderPreamble;
  for (const auto& m : messages) {
    if (m.role == "system") out += m.content;
    if (m.role == "user") out += "### Instruction:\n" + m.content + "\n";
    if (m.role == "assistant") out += "### Response:\n" + m.content + "\n<|EOT|>\n";
  }
  if (gen) out += "### Response:\n";
  return out;
}

// <|im_start|>{role}\n{content}<|im_end|>\n...; generation: "<|im_start|>assistant\n".
std::string render_chatml(Messages messages, const std::string& default_system, bool gen) {
  std::string out;
  if (!default_system.empty() && (messages.empty() || messages[0].role != "system")) {
    out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
  }
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace

Result<std::string> ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r != "system" && r != "user" && r != "assistant") {
      return Status::error("message " + std::to_string(i) + " has role '" + r +
                           "'; supported roles: system, user, assistant");
    }
  }
  switch (format_) {
    case ChatFormat::DEEPSEEK3:
      return render_deepseek3(messages, bos_, eos_, false, add_generation_prompt);
    case ChatFormat::DEEPSEEK_R1:
      return render_deepseek3(messages, bos_, eos_, true, add_generation_prompt);
    case ChatFormat::DEEPSEEK2:
      return render_deepseek2(messages, bos_, eos_, add_generation_prompt);
    case ChatFormat::DEEPSEEK_CODER:
      return render_deepseek_coder(messages, bos_, add_generation_prompt);
    case ChatFormat::CHATML:
      return render_chatml(messages, default_system_, add_generation_prompt);
  }
  return Status::error("unknown chat format");
}

// ---- ReasoningSplitter ----

ReasoningSplitter::ReasoningSplitter(bool starts_in_reasoning)
    : state_(starts_in_reasoning ? State::REASONING : State::START) {}

// Length of the longest suffix of `s` that is a proper prefix of `tag` (may still become it).
static size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

static bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

void ReasoningSplitter::step(Delta& out, bool final) {
  for (;;) {
    switch (state_) {
      case State::START: {
        const size_t ws = std::find_if_not(held_.begin(), held_.end(), is_space) - held_.begin();
        const std::string_view rest = std::string_view(held_).substr(ws);
        if (rest.starts_with(kThinkOpen)) {
          held_.erase(0, ws + kThinkOpen.size());
          state_ = State::REASONING;
          continue;
        }
        if (!final && kThinkOpen.starts_with(rest)) return;  // may still become "<think>"
        state_ = State::CONTENT;
        continue;
      }
      case State::REASONING: {
        const size_t at = held_.find(kThinkClose);
        if (at != std::string::npos) {
          out.reasoning += held_.substr(0, at);
          held_.erase(0, at + kThinkClose.size());
          state_ = State::AFTER_THINK;
          continue;
        }
        const size_t keep = final ? 0 : partial_tag_suffix(held_, kThinkClose);
        out.reasoning += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return;
      }
      case State::AFTER_THINK: {
        const size_t ws = std::find_if_not(held_.begin(), held_.end(), is_space) - held_.begin();
        held_.erase(0, ws);
        if (held_.empty()) return;
        state_ = State::CONTENT;
        continue;
      }
      case State::CONTENT:
        out.content += held_;
        held_.clear();
        return;
    }
  }
}

ReasoningSplitter::Delta ReasoningSplitter::push(std::string_view text) {
  held_ += text;
  Delta d;
  step(d, false);
  return d;
}

ReasoningSplitter::Delta ReasoningSplitter::flush() {
  Delta d;
  step(d, true);
  return d;
}

ReasoningSplitter::Delta ReasoningSplitter::split(std::string_view text, bool starts_in_reasoning) {
  ReasoningSplitter s(starts_in_reasoning);
  Delta a = s.push(text);
  Delta b = s.flush();
  a.reasoning += b.reasoning;
  a.content += b.content;
  return a;
}

}  // namespace ds
