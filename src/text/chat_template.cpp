// Built-in chat formats. The legacy renderers here write what the model's published Jinja
// template produces for plain system/user/assistant conversations (../shared/SPEC.md "Chat
// formats"); the published R1-Distill, V3.1, V3.2 and V4 templates, with tools, are rendered
// exactly by chat_deepseek_formats.cpp. Recognition: first the exact published templates (by
// a hash of their text), then substrings that only one family's template contains, checked
// from the most specific to the most generic.
#include "text/chat_template.h"

#include <algorithm>
#include <cstdint>

#include "text/chat_deepseek_formats.h"

#include "gguf/gguf_file.h"
#include "ds/tokenizer.h"

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
    {"deepseek3", ChatFormat::kDeepseek3},
    {"deepseek-r1", ChatFormat::kDeepseekR1},
    {"deepseek2", ChatFormat::kDeepseek2},
    {"deepseek-llm", ChatFormat::kDeepseek2},
    {"deepseek-coder", ChatFormat::kDeepseekCoder},
    {"chatml", ChatFormat::kChatml},
    {"deepseek-r1-distill-llama", ChatFormat::kDeepseekR1DistillLlama},
    {"deepseek-r1-distill-qwen", ChatFormat::kDeepseekR1DistillQwen},
    {"deepseek-v3.1", ChatFormat::kDeepseekV3_1},
    {"deepseek-v3.2", ChatFormat::kDeepseekV3_2},
    {"deepseek-v4", ChatFormat::kDeepseekV4},
    {"deepseek-v4-flash", ChatFormat::kDeepseekV4Flash},
};

// FNV-1a 64 of each published template's text (surrounding whitespace trimmed), as the
// DeepSeek GGUF files carry it in tokenizer.chat_template (Hugging Face tokenizer_config.json).
struct KnownTemplate {
  uint64_t hash;
  ChatFormat format;
};
constexpr KnownTemplate kKnown[] = {
    {0x731e2d647d2bf911ull, ChatFormat::kDeepseekR1DistillLlama},  // DeepSeek-R1-Distill-Llama-8B
    {0xe8dafd0b656d9f87ull, ChatFormat::kDeepseekR1DistillQwen},   // DeepSeek-R1-Distill-Qwen-32B
    {0xb4e54689957e62cfull, ChatFormat::kDeepseekV3_1},            // DeepSeek-V3.1
    {0x28c1eb4c82828d2dull, ChatFormat::kDeepseekV3_2},            // DeepSeek-V3.2
    {0x05c9566651bb7ab5ull, ChatFormat::kDeepseekV4},              // DeepSeek-V4
    {0xd9b9050150eb6c8cull, ChatFormat::kDeepseekV4Flash},         // DeepSeek-V4-Flash-0731
};

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string_view trim_ws(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

std::string names_list() {
  std::string s;
  for (const auto& n : ChatTemplate::names()) s += (s.empty() ? "" : ", ") + n;
  return s;
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

std::optional<ChatFormat> ChatTemplate::recognize_exact(std::string_view t) {
  const uint64_t h = fnv1a(trim_ws(t));
  for (const auto& k : kKnown) {
    if (k.hash == h) return k.format;
  }
  return std::nullopt;
}

Result<ChatFormat> ChatTemplate::recognize(std::string_view t) {
  if (auto exact = recognize_exact(t)) return *exact;
  if (contains(t, "｜DSML｜")) {
    if (contains(t, "tool_calls>"))
      return contains(t, "reasoning_effort_high") ? ChatFormat::kDeepseekV4Flash : ChatFormat::kDeepseekV4;
    return ChatFormat::kDeepseekV3_2;
  }
  if (contains(t, kAssistant) && contains(t, kUser) && contains(t, "<think></think>")) return ChatFormat::kDeepseekV3_1;
  if (contains(t, kAssistant) && contains(t, "<think>\\n") && contains(t, "<｜tool▁outputs▁begin｜>")) {
    return contains(t, "enable_thinking") ? ChatFormat::kDeepseekR1DistillQwen : ChatFormat::kDeepseekR1DistillLlama;
  }
  if (contains(t, kAssistant) && contains(t, kUser)) {
    return contains(t, kThinkOpen) || contains(t, kThinkClose) ? ChatFormat::kDeepseekR1 : ChatFormat::kDeepseek3;
  }
  if (contains(t, "### Instruction:") && contains(t, "### Response:")) return ChatFormat::kDeepseekCoder;
  if (contains(t, "<|im_start|>") && contains(t, "<|im_end|>")) return ChatFormat::kChatml;
  if (contains(t, "User: ") && contains(t, "Assistant:")) return ChatFormat::kDeepseek2;
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
  if (v32 && (!text.value() || !recognize(*text.value())))
    return ChatTemplate(ChatFormat::kDeepseek3, std::move(bos), std::move(eos));
  if (!text.value()) {
    return Status::error(file.path() +
                         " has no tokenizer.chat_template; choose one with "
                         "--chat-template NAME, one of: " +
                         names_list());
  }
  return from_text(*text.value(), file.path() + ": tokenizer.chat_template", std::move(bos), std::move(eos));
}

ChatTemplate ChatTemplate::from_text(std::string_view tmpl, std::string_view what, std::string bos, std::string eos) {
  std::string warning;
  auto format = recognize(tmpl);
  if (!format) {
    warning = std::string(what) + " is not a known chat format; falling back to 'deepseek3' (" + format.message() + ")";
    format = ChatFormat::kDeepseek3;
  } else if (!recognize_exact(tmpl)) {
    ChatTemplate named(format.value(), "", "");
    warning = std::string(what) +
              " is not one of the published DeepSeek templates; rendering "
              "with the built-in format '" +
              named.name() +
              "' that its markers match (choose another with "
              "--chat-template NAME, one of: " +
              names_list() + ")";
  }
  ChatTemplate t(format.value(), std::move(bos), std::move(eos));
  if (t.format() == ChatFormat::kChatml) t.set_default_system(chatml_default_system(tmpl));
  t.warning_ = std::move(warning);
  return t;
}

const char* ChatTemplate::fallback_name(std::string_view architecture) {
  if (architecture == "deepseek") return "deepseek2";
  if (architecture == "qwen3") return "deepseek-r1";
  return "deepseek3";
}

ChatTemplate::ChatTemplate(ChatFormat format, std::string bos_text, std::string eos_text)
    : format_(format), bos_(std::move(bos_text)), eos_(std::move(eos_text)) {}

bool ChatTemplate::has_reasoning() const {
  switch (format_) {
    case ChatFormat::kDeepseek2:
    case ChatFormat::kDeepseek3:
    case ChatFormat::kDeepseekCoder:
    case ChatFormat::kChatml:
      return false;
    default:
      return true;
  }
}

bool ChatTemplate::opens_reasoning(std::string_view prompt) {
  return prompt.ends_with("<think>") || prompt.ends_with("<think>\n");
}

ToolCallFormat ChatTemplate::tool_call_format() const {
  switch (format_) {
    case ChatFormat::kDeepseek3:
    case ChatFormat::kDeepseekR1:
    case ChatFormat::kDeepseekR1DistillLlama:
    case ChatFormat::kDeepseekR1DistillQwen:
      return ToolCallFormat::kR1;
    case ChatFormat::kDeepseekV3_1:
      return ToolCallFormat::kV3_1;
    case ChatFormat::kDeepseekV3_2:
      return ToolCallFormat::kV3_2;
    case ChatFormat::kDeepseekV4:
    case ChatFormat::kDeepseekV4Flash:
      return ToolCallFormat::kV4;
    default:
      return ToolCallFormat::kNone;
  }
}

const char* ChatTemplate::name() const {
  for (const auto& f : kNames) {
    if (f.format == format_) return f.name;
  }
  return "?";
}

namespace {

using Messages = std::span<const ChatMessage>;

// <bos>{system}\n\nUser: {user}\n\nAssistant: {assistant}<eos>...; generation: "Assistant:".
std::string render_deepseek2(Messages messages, const std::string& bos, const std::string& eos, bool gen) {
  std::string out = bos;
  for (const auto& m : messages) {
    if (m.role == "system") out += m.text() + "\n\n";
    if (m.role == "user") out += "User: " + m.text() + "\n\n";
    if (m.role == "assistant") out += "Assistant: " + m.text() + eos;
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
    if (m.role == "system") out += m.text();
    if (m.role == "user") out += "### Instruction:\n" + m.text() + "\n";
    if (m.role == "assistant") out += "### Response:\n" + m.text() + "\n<|EOT|>\n";
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
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.text() + "<|im_end|>\n";
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace

Result<std::string> ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  ChatInput in;
  in.messages.assign(messages.begin(), messages.end());
  in.add_generation_prompt = add_generation_prompt;
  return render(in);
}

Result<std::string> ChatTemplate::render(const ChatInput& in) const {
  const bool tools = tool_call_format() != ToolCallFormat::kNone;
  const auto& messages = in.messages;
  const bool add_generation_prompt = in.add_generation_prompt;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    const bool ok = r == "system" || r == "user" || r == "assistant" || (tools && (r == "tool" || r == "developer"));
    if (!ok) {
      return Status::error("message " + std::to_string(i) + " has role '" + r + "'; supported roles with '" + name() +
                           "': system, user, assistant" + (tools ? ", developer, tool" : ""));
    }
    if (!tools && !messages[i].tool_calls.empty()) {
      return Status::error("message " + std::to_string(i) + " has tool_calls; the chat format '" + name() +
                           "' has no tool-call syntax");
    }
  }
  switch (format_) {
    case ChatFormat::kDeepseekR1DistillLlama:
      return chat::render_r1_family(in, bos_, chat::kR1DistillLlamaStyle);
    case ChatFormat::kDeepseekR1DistillQwen:
      return chat::render_r1_family(in, bos_, chat::kR1DistillQwenStyle);
    case ChatFormat::kDeepseekV3_1:
      return chat::render_v3_1(in, bos_);
    case ChatFormat::kDeepseekV3_2:
      return chat::render_dsml(in, bos_, chat::DsmlVersion::kV3_2);
    case ChatFormat::kDeepseekV4:
      return chat::render_dsml(in, bos_, chat::DsmlVersion::kV4);
    case ChatFormat::kDeepseekV4Flash:
      return chat::render_dsml(in, bos_, chat::DsmlVersion::kV4Flash);
    case ChatFormat::kDeepseek3:
      return chat::render_r1_family(in, bos_, chat::kV3Style);
    case ChatFormat::kDeepseekR1:
      return chat::render_r1_family(in, bos_, chat::kR1Style);
    case ChatFormat::kDeepseek2:
      return render_deepseek2(messages, bos_, eos_, add_generation_prompt);
    case ChatFormat::kDeepseekCoder:
      return render_deepseek_coder(messages, bos_, add_generation_prompt);
    case ChatFormat::kChatml:
      return render_chatml(messages, default_system_, add_generation_prompt);
  }
  return Status::error("unknown chat format");
}

// ---- ReasoningSplitter ----

ReasoningSplitter::ReasoningSplitter(bool starts_in_reasoning)
    : state_(starts_in_reasoning ? State::kReasoning : State::kStart) {}

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
      case State::kStart: {
        const size_t ws = std::find_if_not(held_.begin(), held_.end(), is_space) - held_.begin();
        const std::string_view rest = std::string_view(held_).substr(ws);
        if (rest.starts_with(kThinkOpen)) {
          held_.erase(0, ws + kThinkOpen.size());
          state_ = State::kReasoning;
          continue;
        }
        if (!final && kThinkOpen.starts_with(rest)) return;  // may still become "<think>"
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        const size_t at = held_.find(kThinkClose);
        if (at != std::string::npos) {
          out.reasoning += held_.substr(0, at);
          held_.erase(0, at + kThinkClose.size());
          state_ = State::kAfterThink;
          continue;
        }
        const size_t keep = final ? 0 : partial_tag_suffix(held_, kThinkClose);
        out.reasoning += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return;
      }
      case State::kAfterThink: {
        const size_t ws = std::find_if_not(held_.begin(), held_.end(), is_space) - held_.begin();
        held_.erase(0, ws);
        if (held_.empty()) return;
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
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
