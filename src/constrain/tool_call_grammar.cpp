// Forced tool-call grammars; see tool_call_grammar.h.
#include "constrain/tool_call_grammar.h"

#include <set>

#include "constrain/json_schema.h"

namespace ds::constrain {
namespace {

using json = nlohmann::ordered_json;

std::string lit(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Markers as the parser reads them (tool_call_parser.cpp).
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";

// DSML parameters of one tool: required ones in order, then each optional one or none.
Result<std::string> dsml_params(const json& params, const std::string& name, std::string* rules) {
  const json props = params.is_object() && params.contains("properties") ? params["properties"] : json::object();
  std::set<std::string> required;
  if (params.is_object() && params.contains("required") && params["required"].is_array()) {
    for (const auto& r : params["required"]) {
      if (r.is_string()) required.insert(r.get<std::string>());
    }
  }
  std::string req, opt;
  int k = 0;
  for (const auto& [key, sub] : props.items()) {
    const std::string rule = name + "-p" + std::to_string(k++);
    auto r = json_schema_rules(sub, params, rule);
    if (!r) return Status::error("tools: '" + name + "' parameter '" + key + "': " + r.message());
    *rules += r.value();
    const std::string elem = lit("<｜DSML｜parameter name=\"" + key + "\" string=\"false\">") + " " + rule + " " +
                             lit(std::string("</｜DSML｜parameter>\n"));
    if (required.count(key)) {
      req += " " + elem;
    } else {
      opt += " (" + elem + ")?";
    }
  }
  return req + opt;
}

}  // namespace

Result<std::string> tool_call_gbnf(const ToolCallConstraint& c) {
  if (c.tools.empty()) return Status::error("tool_call_gbnf: no tools");
  // The prefix ends before the name when the call is not named (tool_choice required).
  const bool named = c.tools.size() == 1 && c.prefix == tool_call_opener(c.format, c.tools[0].name);
  std::string rules, alts;
  for (size_t i = 0; i < c.tools.size(); ++i) {
    const auto& t = c.tools[i];
    const std::string rule = "tool" + std::to_string(i);
    std::string body;
    switch (c.format) {
      case ToolCallFormat::kR1: {
        auto r = json_schema_rules(t.parameters, t.parameters, rule + "-args");
        if (!r) return Status::error("tools: '" + t.name + "': " + r.message());
        rules += r.value();
        body = (named ? "" : lit(t.name + "\n```json\n") + " ") + rule + "-args " +
               lit("\n```" + std::string(kCallEnd) + std::string(kCallsEnd));
        break;
      }
      case ToolCallFormat::kV3_1: {
        auto r = json_schema_rules(t.parameters, t.parameters, rule + "-args");
        if (!r) return Status::error("tools: '" + t.name + "': " + r.message());
        rules += r.value();
        body = (named ? "" : lit(t.name + std::string(kSep)) + " ") + rule + "-args " +
               lit(std::string(kCallEnd) + std::string(kCallsEnd));
        break;
      }
      case ToolCallFormat::kV3_2:
      case ToolCallFormat::kV4: {
        auto p = dsml_params(t.parameters, rule, &rules);
        if (!p) return p.status();
        const std::string close = c.format == ToolCallFormat::kV4 ? "</｜DSML｜tool_calls>" : "</｜DSML｜function_calls>";
        body = (named ? "" : lit(t.name + "\">\n") + " ") + (p.value().empty() ? "" : p.value() + " ") +
               lit("</｜DSML｜invoke>\n" + close);
        break;
      }
      case ToolCallFormat::kNone:
        return Status::error("tool_call_gbnf: the chat format has no tool calls");
    }
    alts += (alts.empty() ? "" : " | ") + std::string("(") + body + ")";
  }
  return "root ::= " + alts + "\n" + rules + json_base_rules();
}

}  // namespace ds::constrain
