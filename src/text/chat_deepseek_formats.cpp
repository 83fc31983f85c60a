// The DeepSeek template renderers; each function follows its Jinja template statement by
// statement (same state variables, same order), so that a diff against the template is
// easy to review. Text literals are the templates' own.
#include "text/chat_deepseek_formats.h"

#include <string_view>

namespace ds::chat {

namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kEnd = "<｜end▁of▁sentence｜>";
constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kOutputsBegin = "<｜tool▁outputs▁begin｜>";
constexpr std::string_view kOutputBegin = "<｜tool▁output▁begin｜>";
constexpr std::string_view kOutputEnd = "<｜tool▁output▁end｜>";
constexpr std::string_view kOutputsEnd = "<｜tool▁outputs▁end｜>";
constexpr std::string_view kDsml = "｜DSML｜";

constexpr std::string_view kV32ToolsHeader =
    "## Tools\n"
    "\n"
    "You have access to a set of tools you can use to answer the user's question.\n"
    "You can invoke functions by writing a \"<｜DSML｜function_calls>\" block like the following as part of your reply "
    "to the user:\n"
    "<｜DSML｜function_calls>\n"
    "<｜DSML｜invoke name=\"$FUNCTION_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$FUNCTION_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜function_calls>\n"
    "\n"
    "String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects "
    "should use JSON format. The \"string\" attribute should be set to \"true\" for string type parameters and "
    "\"false\" for other types (numbers, booleans, arrays, objects).\n"
    "\n"
    "If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking "
    "block. Here is an example:\n"
    "\n"
    "<｜DSML｜function_calls>\n"
    "...\n"
    "</｜DSML｜function_calls>\n"
    "\n"
    "<function_results>\n"
    "...\n"
    "</function_results>\n"
    "\n"
    "<think>...thinking about results</think>\n"
    "\n"
    "Here are the functions available in JSONSchema format:\n"
    "<functions>\n";
constexpr std::string_view kV4ToolsHeader =
    "## Tools\n"
    "\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "
    "\"<｜DSML｜tool_calls>\" block like the following:\n"
    "\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n"
    "\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, "
    "arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n"
    "\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n"
    "\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n"
    "\n"
    "### Available Tool Schemas\n"
    "\n";
constexpr std::string_view kEffortAbsoluteMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n"
    "\n";
constexpr std::string_view kEffortBeyondMax =
    "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively decompose the "
    "problem into its most fundamental components, trace every causal chain to its root, and resolve the underlying "
    "cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple angles and are certain "
    "that no assumption remains unchecked and no error remains undiscovered.\n"
    "\n";
// V4's response-format preamble (followed by the format as JSON).
constexpr std::string_view kResponseFormat =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";
constexpr std::string_view kV32ToolsFooter = "</functions>\n";
constexpr std::string_view kV4ToolsFooter =
    "\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) s += p;
  return s;
}

// Jinja's `'...' + arguments` on a string, used by R1-Distill-Llama.
std::string arguments_text(const ChatToolCall& c) {
  return c.arguments.is_string() ? c.arguments.get<std::string>() : chat_tojson(c.arguments);
}

// Text after the last (R1-Distill: split(...)[-1]) or the first (V3.1: split(..., 1)[1])
// "</think>", or the whole text when there is none.
std::string after_think(const std::string& s, bool last) {
  constexpr std::string_view close = "</think>";
  const size_t at = last ? s.rfind(close) : s.find(close);
  return at == std::string::npos ? s : s.substr(at + close.size());
}

// The system prompt of V3.1 / V3.2 / V4: all system messages joined by a blank line.
std::string joined_system(const ChatInput& in) {
  std::string sp;
  bool first = true;
  for (const ChatMessage& m : in.messages) {
    if (m.role != "system") continue;
    sp += (first ? "" : "\n\n") + m.text();
    first = false;
  }
  return sp;
}

bool tools_given(const ChatInput& in) {
  return (in.tools.is_array() || in.tools.is_object()) && !in.tools.empty();
}

// Each function tool's "function" object as JSON, one per line.
std::string tool_schemas(const json& tools) {
  std::string s;
  for (const json& t : tools) {
    if (t.is_object() && t.value("type", "") == "function" && t.contains("function")) {
      s += chat_tojson(t["function"]) + "\n";
    }
  }
  return s;
}

}  // namespace

Result<std::string> render_r1_family(const ChatInput& in, const std::string& bos, const R1Style& style) {
  bool is_first = false, is_tool = false, is_output_first = true;
  std::string system_prompt;
  if (style.join_systems) {
    system_prompt = joined_system(in);
  } else {
    for (const ChatMessage& m : in.messages) {
      if (m.role == "system") system_prompt = m.text();  // the last one wins
    }
  }
  std::string out = bos + system_prompt;
  for (const ChatMessage& m : in.messages) {
    if (m.role == "user") {
      is_tool = false;
      out += cat({kUser, m.text()});
    }
    const bool calls = style.calls_on_any_list ? !m.tool_calls.empty() : !m.content.has_value();
    if (m.role == "assistant" && calls) {
      is_tool = false;
      for (const ChatToolCall& c : m.tool_calls) {
        const std::string args = style.args_as_json ? chat_tojson(c.arguments) : arguments_text(c);
        const std::string call = cat({kCallBegin, c.type, kSep, c.name, "\n```json\n", args, "\n```", kCallEnd});
        if (!is_first) {
          out += cat({kAssistant, kCallsBegin, call});
          is_first = true;
        } else {
          // The V3 / R1 / R1-Distill-Llama templates close the block after each later call.
          out += "\n" + call;
          if (!style.calls_on_any_list) out += cat({kCallsEnd, kEnd});
        }
      }
      if (style.calls_on_any_list) out += cat({kCallsEnd, kEnd});
    }
    if (m.role == "assistant" && m.content.has_value()) {
      if (is_tool) {
        out += cat({kOutputsEnd, *m.content, kEnd});
        is_tool = false;
      } else {
        out += cat({kAssistant, style.strip_reasoning ? after_think(*m.content, true) : *m.content, kEnd});
      }
    }
    if (m.role == "tool") {
      is_tool = true;
      if (is_output_first) {
        out += cat({kOutputsBegin, kOutputBegin, m.text(), kOutputEnd});
        is_output_first = false;
      } else {
        out += cat({"\n", kOutputBegin, m.text(), kOutputEnd});
      }
    }
  }
  if (is_tool) out += kOutputsEnd;
  if (in.add_generation_prompt && !is_tool) {
    out += cat({kAssistant, style.generation});
    if (style.close_unless_enable_thinking && !in.enable_thinking.value_or(false)) out += "</think>";
  }
  return out;
}

Result<std::string> render_v3_1(const ChatInput& in, const std::string& bos) {
  const bool thinking = in.thinking_on();
  bool is_first = false, is_tool = false, is_last_user = false;
  std::string out = bos + joined_system(in);
  for (const ChatMessage& m : in.messages) {
    if (m.role == "user") {
      is_tool = false;
      is_first = false;
      is_last_user = true;
      out += cat({kUser, m.text()});
    }
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      if (is_last_user) out += cat({kAssistant, "<think></think>"});
      is_last_user = false;
      is_first = false;
      is_tool = false;
      for (const ChatToolCall& c : m.tool_calls) {
        const std::string call = cat({kCallBegin, c.name, kSep, chat_tojson(c.arguments), kCallEnd});
        if (!is_first) {
          out += cat({m.text(), kCallsBegin, call});
          is_first = true;
        } else {
          out += call;
        }
      }
      out += cat({kCallsEnd, kEnd});
    }
    if (m.role == "assistant" && m.tool_calls.empty()) {
      if (is_last_user) {
        out += kAssistant;
        out += m.prefix && thinking ? "<think>" : "<think></think>";
      }
      is_last_user = false;
      if (is_tool) {
        out += cat({m.text(), kEnd});
        is_tool = false;
      } else {
        out += cat({after_think(m.text(), false), kEnd});
      }
    }
    if (m.role == "tool") {
      is_last_user = false;
      is_tool = true;
      out += cat({kOutputBegin, m.text(), kOutputEnd});
    }
  }
  if (in.add_generation_prompt && is_last_user && !is_tool) {
    out += kAssistant;
    out += thinking ? "<think>" : "<think></think>";
  }
  return out;
}

namespace {

// One DSML block: <DSML>function_calls (V3.2) or <DSML>tool_calls (V4) with an invoke per call;
// string values raw, everything else as JSON. V4 writes an empty line for a call without
// arguments.
Result<std::string> dsml_calls(const ChatMessage& m, std::string_view block, bool v4) {
  std::string out = cat({"\n\n<", kDsml, block, ">\n"});
  for (size_t i = 0; i < m.tool_calls.size(); ++i) {
    const ChatToolCall& c = m.tool_calls[i];
    json args = c.arguments;
    if (args.is_string()) {
      args = json::parse(args.get<std::string>(), nullptr, false);
    }
    if (!args.is_object()) {
      return Status::error("tool_calls[" + std::to_string(i) + "].function.arguments of '" + c.name +
                           "' is not a JSON object");
    }
    out += cat({"<", kDsml, "invoke name=\"", c.name, "\">\n"});
    for (const auto& [key, val] : args.items()) {
      const bool is_string = val.is_string();
      out += cat({"<", kDsml, "parameter name=\"", key, "\" string=\"", is_string ? "true" : "false", "\">",
                  is_string ? val.get<std::string>() : chat_tojson(val), "</", kDsml, "parameter>\n"});
    }
    if (v4 && args.empty()) out += "\n";
    out += cat({"</", kDsml, "invoke>\n"});
  }
  out += cat({"</", kDsml, block, ">"});
  return out;
}

std::string dsml_system_prompt(const ChatInput& in, DsmlVersion version) {
  std::string sp = joined_system(in);
  const bool v4 = version != DsmlVersion::kV3_2;
  if (tools_given(in)) {
    const std::string block =
        cat({v4 ? kV4ToolsHeader : kV32ToolsHeader, tool_schemas(in.tools), v4 ? kV4ToolsFooter : kV32ToolsFooter});
    sp = sp.empty() ? block : sp + "\n\n" + block;
  }
  if (v4 && !in.response_format.is_null()) {
    if (!sp.empty()) sp += "\n\n";
    sp += cat({kResponseFormat, chat_tojson(in.response_format)});
  }
  return sp;
}

// V4's effort preamble ahead of the system prompt (thinking mode only).
std::string_view effort_preamble(const ChatInput& in, DsmlVersion version, bool thinking) {
  if (in.messages.empty() || !thinking || !in.reasoning_effort) return {};
  const std::string& e = *in.reasoning_effort;
  if (version == DsmlVersion::kV4) return e == "max" ? kEffortAbsoluteMax : std::string_view();
  if (version == DsmlVersion::kV4Flash) {
    if (e == "high") return kEffortAbsoluteMax;
    if (e == "max") return kEffortBeyondMax;
  }
  return {};
}

std::string thinking_block(const ChatMessage& m) {
  return cat({"<think>", m.reasoning_content.value_or(""), "</think>"});
}

Result<std::string> render_v3_2(const ChatInput& in, const std::string& bos) {
  const bool thinking = in.thinking_on();
  std::string out = bos + dsml_system_prompt(in, DsmlVersion::kV3_2);
  const auto& msgs = in.messages;
  int last_user = -1;
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (msgs[i].role == "user" || msgs[i].role == "developer") last_user = static_cast<int>(i);
  }
  bool pending_asst = false, pending_tool = false;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if (m.role == "user") {
      out += cat({kUser, m.text()});
      pending_asst = true;
      pending_tool = false;
    } else if (m.role == "assistant") {
      const bool after_last_user = static_cast<int>(i) > last_user;
      if (pending_asst) {
        out += kAssistant;
        out += after_last_user && thinking ? thinking_block(m) : "</think>";
      } else if (pending_tool) {
        out += "\n\n";
        out += after_last_user && thinking ? thinking_block(m) : "</think>";
      }
      pending_asst = pending_tool = false;
      out += m.text();
      if (!m.tool_calls.empty()) {
        auto calls = dsml_calls(m, "function_calls", false);
        if (!calls) return Status::error("messages[" + std::to_string(i) + "]." + calls.message());
        out += *calls;
      }
      out += kEnd;
    } else if (m.role == "tool") {
      // Results are numbered against the latest assistant turn with calls before them.
      int assistant = -1;
      for (size_t k = 0; k < i; ++k) {
        if (msgs[k].role == "assistant" && !msgs[k].tool_calls.empty()) assistant = static_cast<int>(k);
      }
      if (assistant < 0) {
        return Status::error("messages[" + std::to_string(i) + "]: a tool result needs an earlier assistant tool call");
      }
      const size_t call_order = i - static_cast<size_t>(assistant);
      if (call_order == 1) out += "\n\n<function_results>";
      out += cat({"\n<result>", m.text(), "</result>"});
      if (call_order == msgs[assistant].tool_calls.size()) {
        out += "\n</function_results>";
        pending_asst = false;
        pending_tool = true;
      }
    }
  }
  if (in.add_generation_prompt) {
    if (pending_asst) {
      out += kAssistant;
      out += thinking ? "<think>" : "<think></think>";
    } else if (pending_tool) {
      out += thinking ? "\n\n<think>" : "\n\n<think></think>";
    }
  }
  return out;
}

Result<std::string> render_v4(const ChatInput& in, const std::string& bos, DsmlVersion version) {
  const bool thinking = in.thinking_on();
  const bool has_tools = tools_given(in);
  const std::string system_prompt = dsml_system_prompt(in, version);
  std::string out = cat({bos, effort_preamble(in, version, thinking), system_prompt});
  const auto& msgs = in.messages;
  int last_user = -1;
  bool has_tool_results = false;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string& r = msgs[i].role;
    if (r == "user" || r == "developer" || r == "tool") last_user = static_cast<int>(i);
    if (r == "tool") has_tool_results = true;
  }
  bool in_user = false;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if (m.role == "user" || m.role == "developer" || m.role == "tool") {
      // Consecutive user-side messages share one <｜User｜> turn.
      out += in_user ? "\n\n" : std::string(kUser);
      in_user = true;
      out += m.role == "tool" ? cat({"<tool_result>", m.text(), "</tool_result>"}) : m.text();
    } else if (m.role == "assistant") {
      in_user = false;
      out += kAssistant;
      const bool after_last_user = static_cast<int>(i) > last_user;
      const bool keep_reasoning = thinking && (!in.drop_thinking || has_tools || after_last_user || has_tool_results);
      out += keep_reasoning ? thinking_block(m) : "</think>";
      out += m.text();
      if (!m.tool_calls.empty()) {
        auto calls = dsml_calls(m, "tool_calls", true);
        if (!calls) return Status::error("messages[" + std::to_string(i) + "]." + calls.message());
        out += *calls;
      }
      out += kEnd;
    }
  }
  if (in.add_generation_prompt) {
    out += kAssistant;
    out += thinking ? "<think>" : "</think>";
  }
  return out;
}

}  // namespace

Result<std::string> render_dsml(const ChatInput& in, const std::string& bos, DsmlVersion version) {
  return version == DsmlVersion::kV3_2 ? render_v3_2(in, bos) : render_v4(in, bos, version);
}

}  // namespace ds::chat
