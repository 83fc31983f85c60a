// Tool calls in the DeepSeek output formats -> OpenAI tool calls. One incremental parser
// serves streaming and non-streaming responses (a whole text is one push and a flush), so a
// stream's deltas always add up to the non-streaming message.
//
// Formats (../shared/chat/README.md; docs/chat.md has the markup in full):
//   R1    <｜tool▁calls▁begin｜>, per call <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//         then ```json ARGS ``` and <｜tool▁call▁end｜>, then <｜tool▁calls▁end｜>
//   V3_1  the same block; a call is <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>
//   V3_2  a <｜DSML｜function_calls> block with one <｜DSML｜invoke name="NAME"> per call
//         holding <｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>
//   V4    the same DSML markup in a <｜DSML｜tool_calls> block
// DSML parameters become a JSON object: string="true" values are raw text (escaped here),
// string="false" values are JSON.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ds {

enum class ToolCallFormat { kNone, kR1, kV3_1, kV3_2, kV4 };

const char* tool_call_format_name(ToolCallFormat f);

// The text that opens a call in format `f`, as the template writes it after the assistant
// marker; with a name, the opener continues up to that call's arguments. A forced call
// (tool_choice required / named) prefills the assistant turn with it.
std::string tool_call_opener(ToolCallFormat f, std::string_view name = {});

// What a constraint engine needs to force a call: the format, the prefill the output starts
// with, and the allowed tools with their parameter schemas (one tool when it is named).
struct ToolCallConstraint {
  struct Tool {
    std::string name;
    nlohmann::ordered_json parameters;  // JSON Schema object
  };
  ToolCallFormat format = ToolCallFormat::kNone;
  std::string prefix;
  std::vector<Tool> tools;
  bool parallel = true;
};

struct ToolCallEvent {
  enum class Kind {
    kContent,    // text outside the call block
    kCallBegin,  // a call opens: index, name
    kArguments,  // a fragment of the call's arguments (JSON text)
  };
  Kind kind;
  int index = 0;
  std::string text;  // content, name or argument fragment
};

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object as text
};

struct ToolCallSyntax;  // the markers of one format (tool_call_parser.cpp)

class ToolCallParser {
 public:
  // max_calls: calls after this many are dropped (parallel_tool_calls = false: 1).
  explicit ToolCallParser(ToolCallFormat format, int max_calls = 1 << 30);
  std::vector<ToolCallEvent> push(std::string_view text);
  // The end of the output: what was held back, and the final check of every call.
  std::vector<ToolCallEvent> flush();

  const std::vector<ParsedToolCall>& calls() const { return calls_; }
  // "" when every call was well formed; else what was wrong (unfinished call, bad JSON).
  const std::string& error() const { return error_; }

  struct Whole {
    std::string content;
    std::vector<ParsedToolCall> calls;
    std::string error;
  };
  static Whole parse(std::string_view text, ToolCallFormat format);

 private:
  enum class State { kText, kBetweenCalls, kCallHead, kArgsRaw, kArgsAfter, kParams, kParamValue, kDone };
  // One step of the state machine; false: it needs more text. One function per state.
  bool step(std::vector<ToolCallEvent>& out);
  bool step_text(std::vector<ToolCallEvent>& out);
  bool step_between_calls(std::vector<ToolCallEvent>& out);
  bool step_call_head(std::vector<ToolCallEvent>& out);
  bool step_args_raw(std::vector<ToolCallEvent>& out);
  bool step_args_after(std::vector<ToolCallEvent>& out);
  bool step_params(std::vector<ToolCallEvent>& out);
  bool step_param_value(std::vector<ToolCallEvent>& out);
  void emit_content(std::vector<ToolCallEvent>& out, std::string_view text, bool final);
  void emit_args(std::vector<ToolCallEvent>& out, std::string text);
  void begin_call(std::vector<ToolCallEvent>& out, std::string name);
  void end_call();
  void fail(std::string why);

  ToolCallFormat format_;
  const ToolCallSyntax* syntax_;
  int max_calls_;
  State state_ = State::kText;
  std::string buf_;      // text not consumed yet
  std::string ws_held_;  // trailing whitespace of content (dropped before a call block)
  bool param_string_ = false;
  bool first_param_ = true;
  std::vector<ParsedToolCall> calls_;
  std::string error_;
};

}  // namespace ds
