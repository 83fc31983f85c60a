// Built-in renderers for the chat templates that DeepSeek's R1-Distill, V3.1, V3.2 and V4 GGUF
// files carry. Each function writes exactly what the published Jinja template writes under
// Hugging Face's apply_chat_template settings, including the templates' quirks (which
// assistant turns keep their reasoning, where tool results go); docs/chat.md says why these
// are C++ rather than a Jinja interpreter. The text starts with `bos`.
#pragma once
#include <string>

#include "ds/status.h"
#include "model/chat_input.h"

namespace ds::chat {

enum class DsmlVersion { V3_2, V4, V4_FLASH };

// R1-Distill-Llama (qwen = false) and R1-Distill-Qwen (qwen = true).
Result<std::string> render_r1_distill(const ChatInput& in, const std::string& bos, bool qwen);
Result<std::string> render_v3_1(const ChatInput& in, const std::string& bos);
// V3.2 (DSML function_calls), V4 and V4-Flash-0731 (DSML tool_calls).
Result<std::string> render_dsml(const ChatInput& in, const std::string& bos, DsmlVersion version);

}  // namespace ds::chat
