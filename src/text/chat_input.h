// What a chat template renders: the conversation (OpenAI roles and fields), the offered tools
// and the switches DeepSeek's templates read. Plain data, shared by the renderers
// (chat_template.cpp, chat_deepseek_formats.cpp) and the API layer that fills it from a request.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ds {

struct ChatToolCall {
  std::string id;
  std::string type = "function";
  std::string name;
  // The call's arguments: a JSON object, or a string when the client sent text that is not
  // a JSON object (templates that need an object report it as an error).
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::optional<std::string> c) : role(std::move(r)), content(std::move(c)) {}

  std::string role;                    // system | developer | user | assistant | tool
  std::optional<std::string> content;  // nullopt: JSON null (some templates test "is none")
  std::optional<std::string> reasoning_content;
  std::vector<ChatToolCall> tool_calls;  // assistant
  std::string tool_call_id;              // tool
  bool prefix = false;                   // V3.1: the assistant turn is a prefix to continue

  std::string text() const { return content.value_or(""); }
};

// The variables of the template context. Unset optionals are "undefined" in Jinja terms;
// each template has its own defaults (V3.1+: thinking falls back to enable_thinking, then
// false; R1-Distill-Qwen reads only enable_thinking).
struct ChatInput {
  std::vector<ChatMessage> messages;
  nlohmann::ordered_json tools;  // null or [{"type": "function", "function": {...}}, ...]
  bool add_generation_prompt = true;
  std::optional<bool> thinking;
  std::optional<bool> enable_thinking;
  std::optional<std::string> reasoning_effort;  // V4: "max" (and "high" on V4-Flash)
  nlohmann::ordered_json response_format;       // null: not given (V4 renders it)
  bool drop_thinking = true;                    // V4: drop earlier turns' reasoning

  // thinking ?? enable_thinking ?? false, as the V3.1, V3.2 and V4 templates resolve it.
  bool thinking_on() const { return thinking.value_or(enable_thinking.value_or(false)); }
};

// JSON text as the templates' `tojson` writes it (Hugging Face apply_chat_template: Python's
// json.dumps with ensure_ascii=False and ", " / ": " separators, keys in the given order).
std::string chat_tojson(const nlohmann::ordered_json& value);

}  // namespace ds
