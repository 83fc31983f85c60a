// A chat response's message, built incrementally from the generated text: the reasoning
// (ReasoningFilter), then tool calls in the chat format's syntax (ToolCallParser) and the
// content around them. Streaming and non-streaming responses both read it, so the deltas of
// a stream always add up to the non-streaming message.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "text/tool_call_parser.h"
#include "server/text_codec.h"
#include "server/text_stream.h"

namespace ds::api {

class ChatOutput {
 public:
  struct CallDelta {
    int index = 0;
    std::string id;  // set on the call's first delta, with the name
    std::string name;
    std::string arguments;  // a fragment of the JSON text
  };
  struct Delta {
    std::string reasoning;
    std::string content;
    std::vector<CallDelta> calls;
  };

  // format NONE: no call parsing, the content is the text. parallel = false keeps the first call.
  ChatOutput(std::unique_ptr<ReasoningFilter> reasoning, ToolCallFormat format, bool parallel);
  // Text the server wrote after the prompt (a forced call's opener): it is the start of the
  // content, parsed as if the model had written it.
  Delta prefill(std::string_view text);
  Delta push(std::string_view text);
  Delta flush();

  const std::vector<ParsedToolCall>& calls() const { return parser_.calls(); }
  const std::vector<std::string>& ids() const { return ids_; }
  // Malformed call markup ("" when none): the response then returns raw_content() as text.
  const std::string& error() const { return parser_.error(); }
  const std::string& raw_content() const { return raw_content_; }

 private:
  Delta from_content(std::string_view content, const std::string& reasoning, bool last);

  std::unique_ptr<ReasoningFilter> reasoning_;
  ToolCallParser parser_;
  bool parse_;
  std::string raw_content_;
  std::vector<std::string> ids_;
  // The reasoning splitter may cut text anywhere: UTF-8 characters are re-joined per field.
  StopTextStream utf8_reasoning_{{}}, utf8_content_{{}};
};

// "call_" and 24 random letters and digits.
std::string new_tool_call_id();

}  // namespace ds::api
