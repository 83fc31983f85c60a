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
constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";

// A string schema without constraints: its value may also be written raw (string="true"),
// as the templates ask for strings; any raw text is such a string.
bool plain_string(const json& s) {
  if (!s.is_object() || s.value("type", json()) != "string") return false;
  for (const auto& [k, v] : s.items()) {
    if (k != "type" && k != "description" && k != "title" && k != "examples" && k != "default") return false;
  }
  return true;
}

// Raw parameter text: anything without "</" (so it cannot run into the closing tag; a raw
// value holding "</" is not offered, its string="false" form still is).
constexpr std::string_view kDsmlRawRule = "dsml-raw ::= ([^<] | \"<\" [^/])*\n";

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
    const std::string close = lit(std::string("</｜DSML｜parameter>\n"));
    std::string elem = lit("<｜DSML｜parameter name=\"" + key + "\" string=\"false\">") + " " + rule + " " + close;
    if (plain_string(sub)) {
      elem = "(" + elem + " | " + lit("<｜DSML｜parameter name=\"" + key + "\" string=\"true\">") + " dsml-raw " +
             close + ")";
    }
    if (required.count(key)) {
      req += " " + elem;
    } else {
      opt += " (" + elem + ")?";
    }
  }
  return req + opt;
}

}  // namespace

Result<std::string> tool_call_gbnf(const ToolCallConstraint& c, std::string_view lead) {
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
        body =
            (named ? "" : lit(t.name + "\n```json\n") + " ") + rule + "-args " + lit("\n```" + std::string(kCallEnd));
        break;
      }
      case ToolCallFormat::kV3_1: {
        auto r = json_schema_rules(t.parameters, t.parameters, rule + "-args");
        if (!r) return Status::error("tools: '" + t.name + "': " + r.message());
        rules += r.value();
        body = (named ? "" : lit(t.name + std::string(kSep)) + " ") + rule + "-args " + lit(std::string(kCallEnd));
        break;
      }
      case ToolCallFormat::kV3_2:
      case ToolCallFormat::kV4: {
        auto p = dsml_params(t.parameters, rule, &rules);
        if (!p) return p.status();
        body = (named ? "" : lit(t.name + "\">\n") + " ") + (p.value().empty() ? "" : p.value() + " ") +
               lit("</｜DSML｜invoke>\n");
        break;
      }
      case ToolCallFormat::kNone:
        return Status::error("tool_call_gbnf: the chat format has no tool calls");
    }
    alts += (alts.empty() ? "" : " | ") + std::string("(") + body + ")";
  }
  // The block's close, and the opener of one more call (auto with parallel calls only).
  std::string close(kCallsEnd), next = std::string(kCallBegin);
  if (c.format == ToolCallFormat::kR1) next += "function" + std::string(kSep);
  if (c.format == ToolCallFormat::kV3_2 || c.format == ToolCallFormat::kV4) {
    close = c.format == ToolCallFormat::kV4 ? "</｜DSML｜tool_calls>" : "</｜DSML｜function_calls>";
    next = "<｜DSML｜invoke name=\"";
  }
  std::string root = "(" + alts + ")";
  if (!lead.empty()) root = lit(lead) + " " + root;
  if (!lead.empty() && c.parallel && !named) root += " (" + lit(next) + " (" + alts + "))*";
  if (c.format == ToolCallFormat::kV3_2 || c.format == ToolCallFormat::kV4) rules += kDsmlRawRule;
  return "root ::= " + root + " " + lit(close) + "\n" + rules + json_base_rules();
}

std::string_view tool_call_trigger(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kR1:
    case ToolCallFormat::kV3_1:
      return kCallsBegin;
    case ToolCallFormat::kV3_2:
      return "<｜DSML｜function_calls>";
    case ToolCallFormat::kV4:
      return "<｜DSML｜tool_calls>";
    case ToolCallFormat::kNone:
      break;
  }
  return {};
}

// Rule F_k (k bytes of the trigger matched, the trigger not seen yet) ::= "" | b F_next(k, b)
// for every byte b whose next state is not the whole trigger | (k = m-1) trigger[m-1] call.
// next(k, b) is the longest prefix of the trigger that ends the text trigger[0, k) + b.
Grammar auto_call_grammar(Grammar g, std::string_view trigger) {
  using Kind = Grammar::Kind;
  const size_t m = trigger.size();
  if (m == 0) return g;
  const auto first = static_cast<uint32_t>(g.alts.size());
  auto term = [&g](const std::bitset<256>& set) {
    g.sets.push_back(set);
    g.syms.push_back({Kind::kTerm, static_cast<uint32_t>(g.sets.size() - 1)});
  };
  for (size_t k = 0; k < m; ++k) {
    std::vector<std::bitset<256>> to(m);  // bytes leading from F_k to F_j
    std::string seen(trigger.substr(0, k));
    for (int b = 0; b < 256; ++b) {
      const std::string s = seen + static_cast<char>(b);
      size_t j = std::min(s.size(), m);
      while (j > 0 && s.compare(s.size() - j, j, trigger, 0, j) != 0) --j;
      if (j < m) to[j].set(static_cast<size_t>(b));
    }
    std::vector<uint32_t> alts;
    alts.push_back(static_cast<uint32_t>(g.syms.size()));
    g.syms.push_back({Kind::kEnd, 0});
    for (size_t j = 0; j < m; ++j) {
      if (to[j].none()) continue;
      alts.push_back(static_cast<uint32_t>(g.syms.size()));
      term(to[j]);
      g.syms.push_back({Kind::kRef, first + static_cast<uint32_t>(j)});
      g.syms.push_back({Kind::kEnd, 0});
    }
    if (k + 1 == m) {
      alts.push_back(static_cast<uint32_t>(g.syms.size()));
      term(std::bitset<256>().set(static_cast<unsigned char>(trigger[k])));
      g.syms.push_back({Kind::kRef, g.root});
      g.syms.push_back({Kind::kEnd, 0});
    }
    g.alts.push_back(std::move(alts));
    g.names.push_back("free-text-" + std::to_string(k));
  }
  g.root = first;
  return g;
}

}  // namespace ds::constrain
