// Built-in renderers for the chat templates that DeepSeek's V3, R1, R1-Distill, V3.1, V3.2 and
// V4 GGUF files carry. Each function writes exactly what the published Jinja template writes under
// Hugging Face's apply_chat_template settings, including the templates' quirks (which
// assistant turns keep their reasoning, where tool results go); docs/chat.md says why these
// are C++ rather than a Jinja interpreter. The text starts with `bos`.
#pragma once
#include <string>
#include <string_view>

#include "ds/status.h"
#include "text/chat_input.h"

namespace ds::chat {

enum class DsmlVersion { kV3_2, kV4, kV4Flash };

// The V3 / R1 template family (fenced-json tool calls, <｜tool▁outputs▁begin｜> results); its
// members differ in these points only.
struct R1Style {
  bool calls_on_any_list;             // R1-Distill-Qwen: calls for any non-empty list; else for a null content
  bool args_as_json;                  // R1-Distill-Qwen: tojson(arguments); else the arguments text
  bool join_systems;                  // V3, R1: all system prompts, blank-line separated; else the last
  bool strip_reasoning;               // earlier answers keep only the text after the last </think>
  std::string_view generation;        // written after the assistant marker
  bool close_unless_enable_thinking;  // R1-Distill-Qwen: "</think>" unless enable_thinking
};
constexpr R1Style kV3Style{false, false, true, false, "", false};
constexpr R1Style kR1Style{false, false, true, true, "<think>\n", false};
constexpr R1Style kR1DistillLlamaStyle{false, false, false, true, "<think>\n", false};
constexpr R1Style kR1DistillQwenStyle{true, true, false, true, "<think>\n", true};

Result<std::string> render_r1_family(const ChatInput& in, const std::string& bos, const R1Style& style);
Result<std::string> render_v3_1(const ChatInput& in, const std::string& bos);
// V3.2 (DSML function_calls), V4 and V4-Flash-0731 (DSML tool_calls).
Result<std::string> render_dsml(const ChatInput& in, const std::string& bos, DsmlVersion version);

}  // namespace ds::chat
