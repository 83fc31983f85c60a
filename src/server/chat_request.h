// The chat side of an OpenAI request: messages with every role and field the DeepSeek
// templates read, tools, tool_choice, parallel_tool_calls and the thinking switches, checked
// with errors that name the field ("messages[3].tool_call_id", "tools[0].function.name").
// Shared by /v1/chat/completions and /apply-template.
#pragma once
#include <optional>
#include <string>

#include "text/chat_input.h"
#include "text/tool_call_parser.h"
#include "server/api_internal.h"

namespace ds::api {

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ChatRequest {
  ChatInput input;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_name;  // NAMED: the function
  bool parallel_tool_calls = true;
  ToolCallFormat format = ToolCallFormat::kNone;  // NONE: outputs are not parsed for calls

  // Set when a call is forced (required / named): the prefill and the allowed tools'
  // schemas, the plug for a grammar constraint (see docs/chat.md "Forced tool calls").
  std::optional<ToolCallConstraint> forced;
  // Set for tool_choice auto with tools: the tools' schemas for the grammar that constrains a
  // call once the model opens one (prefix: the unnamed opener).
  std::optional<ToolCallConstraint> auto_calls;
};

// Fills `out` from the request body; the codec says which tool-call syntax the chat format
// has. add_generation_prompt comes from the body where given (default true).
Status parse_chat_request(const json& body, const TextCodec& codec, ChatRequest* out);

// What follows the rendered prompt for a forced call: the reasoning closed when the prompt
// opened it, then the call's opening syntax (through the name when it is named).
std::string forced_call_prefill(const ChatRequest& r, std::string_view prompt);

// A small JSON Schema check of a forced call's arguments (type, required, properties, enum,
// items): "" when they validate, else the first problem with its JSON path.
std::string validate_arguments(const nlohmann::ordered_json& value, const nlohmann::ordered_json& schema,
                               const std::string& path = "arguments");

}  // namespace ds::api
