// ToolCallParser: a small state machine over the call markup. Text that may still turn into
// a marker is held back (the longest suffix that is a prefix of the marker), as is trailing
// whitespace of content and raw arguments, so nothing emitted is ever taken back. Content
// whitespace right before a call block is dropped (the templates write "\n\n" there).
#include "text/tool_call_parser.h"

#include <algorithm>
#include <cstdio>

namespace ds {

struct ToolCallSyntax {
  std::string_view block_open;
  std::string_view block_close;
  std::string_view call_open;
  bool dsml;
  bool typed_head;  // R1: TYPE<sep>NAME then a fenced json block
};

namespace {

constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";
constexpr std::string_view kFence = "```";
constexpr std::string_view kFenceJson = "```json";
constexpr std::string_view kParamOpen = "<｜DSML｜parameter name=\"";
constexpr std::string_view kParamClose = "</｜DSML｜parameter>";
constexpr std::string_view kInvokeClose = "</｜DSML｜invoke>";

bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

void skip_ws(std::string& s) {
  s.erase(0, std::find_if_not(s.begin(), s.end(), is_ws) - s.begin());
}

std::string trim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// The inside of a JSON string literal, byte by byte (UTF-8 passes through unchanged, so a
// character cut between two pushes stays intact once joined).
std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

const ToolCallSyntax kR1{kCallsBegin, kCallsEnd, kCallBegin, false, true};
const ToolCallSyntax kV31{kCallsBegin, kCallsEnd, kCallBegin, false, false};
const ToolCallSyntax kV32{"<｜DSML｜function_calls>", "</｜DSML｜function_calls>", "<｜DSML｜invoke name=\"", true,
                          false};
const ToolCallSyntax kV4{"<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>", "<｜DSML｜invoke name=\"", true, false};

const ToolCallSyntax* syntax_for(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kR1:
      return &kR1;
    case ToolCallFormat::kV3_1:
      return &kV31;
    case ToolCallFormat::kV3_2:
      return &kV32;
    case ToolCallFormat::kV4:
      return &kV4;
    case ToolCallFormat::kNone:
      break;
  }
  return nullptr;
}

}  // namespace

const char* tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kR1:
      return "deepseek-r1";
    case ToolCallFormat::kV3_1:
      return "deepseek-v3.1";
    case ToolCallFormat::kV3_2:
      return "deepseek-v3.2";
    case ToolCallFormat::kV4:
      return "deepseek-v4";
    case ToolCallFormat::kNone:
      break;
  }
  return "none";
}

std::string tool_call_opener(ToolCallFormat f, std::string_view name) {
  const std::string n(name);
  switch (f) {
    case ToolCallFormat::kR1:
      return std::string(kCallsBegin) + std::string(kCallBegin) + "function" + std::string(kSep) +
             (n.empty() ? "" : n + "\n```json\n");
    case ToolCallFormat::kV3_1:
      return std::string(kCallsBegin) + std::string(kCallBegin) + (n.empty() ? "" : n + std::string(kSep));
    case ToolCallFormat::kV3_2:
    case ToolCallFormat::kV4: {
      const ToolCallSyntax* s = syntax_for(f);
      return "\n\n" + std::string(s->block_open) + "\n" + std::string(s->call_open) + (n.empty() ? "" : n + "\">\n");
    }
    case ToolCallFormat::kNone:
      break;
  }
  return "";
}

ToolCallParser::ToolCallParser(ToolCallFormat format, int max_calls)
    : format_(format), syntax_(syntax_for(format)), max_calls_(max_calls) {}

void ToolCallParser::fail(std::string why) {
  if (error_.empty()) error_ = std::move(why);
  state_ = State::kDone;
}

void ToolCallParser::emit_content(std::vector<ToolCallEvent>& out, std::string_view text, bool final) {
  std::string s = ws_held_ + std::string(text);
  size_t end = s.size();
  while (end > 0 && is_ws(s[end - 1])) --end;
  ws_held_ = final ? "" : s.substr(end);
  s.resize(end);
  if (!s.empty()) out.push_back({ToolCallEvent::Kind::kContent, 0, std::move(s)});
}

void ToolCallParser::emit_args(std::vector<ToolCallEvent>& out, std::string text) {
  if (text.empty()) return;
  calls_.back().arguments += text;
  out.push_back({ToolCallEvent::Kind::kArguments, static_cast<int>(calls_.size()) - 1, std::move(text)});
}

void ToolCallParser::begin_call(std::vector<ToolCallEvent>& out, std::string name) {
  calls_.push_back({name, ""});
  out.push_back({ToolCallEvent::Kind::kCallBegin, static_cast<int>(calls_.size()) - 1, std::move(name)});
}

void ToolCallParser::end_call() {
  const ParsedToolCall& c = calls_.back();
  const auto args = nlohmann::ordered_json::parse(c.arguments, nullptr, false);
  if (args.is_discarded() || !args.is_object()) {
    fail("the arguments of the call to '" + c.name + "' are not a JSON object: " + c.arguments);
    return;
  }
  state_ = static_cast<int>(calls_.size()) >= max_calls_ ? State::kDone : State::kBetweenCalls;
}

bool ToolCallParser::step_text(std::vector<ToolCallEvent>& out) {
  const ToolCallSyntax& s = *syntax_;
  const size_t at = buf_.find(s.block_open);
  if (at != std::string::npos) {
    emit_content(out, std::string_view(buf_).substr(0, at), false);
    ws_held_.clear();
    buf_.erase(0, at + s.block_open.size());
    state_ = State::kBetweenCalls;
    return true;
  }
  const size_t keep = partial_suffix(buf_, s.block_open);
  emit_content(out, std::string_view(buf_).substr(0, buf_.size() - keep), false);
  buf_.erase(0, buf_.size() - keep);
  return false;
}

bool ToolCallParser::step_between_calls(std::vector<ToolCallEvent>& out) {
  const ToolCallSyntax& s = *syntax_;
  skip_ws(buf_);
  if (buf_.starts_with(s.call_open)) {
    buf_.erase(0, s.call_open.size());
    state_ = State::kCallHead;
    return true;
  }
  if (buf_.starts_with(s.block_close)) {
    buf_.erase(0, s.block_close.size());
    state_ = State::kText;
    return true;
  }
  if (s.call_open.starts_with(buf_) || s.block_close.starts_with(buf_)) return false;
  fail("unexpected text in the tool-call block: " + buf_.substr(0, 40));
  return false;
}

bool ToolCallParser::step_call_head(std::vector<ToolCallEvent>& out) {
  const ToolCallSyntax& s = *syntax_;
  if (s.dsml) {
    const size_t at = buf_.find("\">");
    if (at == std::string::npos) return false;
    std::string name = buf_.substr(0, at);
    buf_.erase(0, at + 2);
    begin_call(out, std::move(name));
    first_param_ = true;
    state_ = State::kParams;
    return true;
  }
  const size_t sep = buf_.find(kSep);
  if (sep == std::string::npos) return false;
  size_t name_start = sep + kSep.size(), args_start = name_start;
  std::string name;
  if (s.typed_head) {  // function<sep>NAME\n```json\n
    const size_t fence = buf_.find(kFenceJson, name_start);
    if (fence == std::string::npos || fence + kFenceJson.size() >= buf_.size()) return false;
    name = trim(std::string_view(buf_).substr(name_start, fence - name_start));
    args_start = fence + kFenceJson.size();
    if (buf_[args_start] == '\n') ++args_start;
  } else {  // NAME<sep>
    name = trim(std::string_view(buf_).substr(0, sep));
  }
  buf_.erase(0, args_start);
  begin_call(out, std::move(name));
  state_ = State::kArgsRaw;
  return true;
}

bool ToolCallParser::step_args_raw(std::vector<ToolCallEvent>& out) {
  const ToolCallSyntax& s = *syntax_;
  const std::string_view term = s.typed_head ? kFence : kCallEnd;
  const size_t at = buf_.find(term);
  const size_t n = at != std::string::npos ? at : buf_.size() - partial_suffix(buf_, term);
  // Trailing whitespace waits: it is dropped when the terminator follows.
  std::string chunk = ws_held_ + buf_.substr(0, n);
  size_t end = chunk.size();
  while (end > 0 && is_ws(chunk[end - 1])) --end;
  ws_held_ = at != std::string::npos ? "" : chunk.substr(end);
  chunk.resize(end);
  emit_args(out, std::move(chunk));
  if (at == std::string::npos) {
    buf_.erase(0, n);
    return false;
  }
  buf_.erase(0, at + term.size());
  if (s.typed_head) {
    state_ = State::kArgsAfter;
  } else {
    end_call();
  }
  return true;
}

bool ToolCallParser::step_args_after(std::vector<ToolCallEvent>& out) {
  skip_ws(buf_);
  if (buf_.starts_with(kCallEnd)) {
    buf_.erase(0, kCallEnd.size());
    end_call();
    return true;
  }
  if (kCallEnd.starts_with(buf_)) return false;
  fail("expected " + std::string(kCallEnd) + " after the arguments of '" + calls_.back().name + "'");
  return false;
}

bool ToolCallParser::step_params(std::vector<ToolCallEvent>& out) {
  skip_ws(buf_);
  if (buf_.starts_with(kParamOpen)) {
    const size_t at = buf_.find("\">", kParamOpen.size());
    if (at == std::string::npos) return false;
    const std::string head = buf_.substr(kParamOpen.size(), at - kParamOpen.size());
    constexpr std::string_view kStringAttr = "\" string=\"";
    const size_t attr = head.find(kStringAttr);
    const std::string key = head.substr(0, attr);
    param_string_ = attr == std::string::npos || head.substr(attr + kStringAttr.size()) == "true";
    buf_.erase(0, at + 2);
    emit_args(out,
              std::string(first_param_ ? "{" : ", ") + "\"" + json_escape(key) + "\": " + (param_string_ ? "\"" : ""));
    first_param_ = false;
    state_ = State::kParamValue;
    return true;
  }
  if (buf_.starts_with(kInvokeClose)) {
    buf_.erase(0, kInvokeClose.size());
    emit_args(out, first_param_ ? "{}" : "}");
    end_call();
    return true;
  }
  if (kParamOpen.starts_with(buf_) || kInvokeClose.starts_with(buf_)) return false;
  fail("unexpected text in the call to '" + calls_.back().name + "': " + buf_.substr(0, 40));
  return false;
}

bool ToolCallParser::step_param_value(std::vector<ToolCallEvent>& out) {
  const size_t at = buf_.find(kParamClose);
  const size_t n = at != std::string::npos ? at : buf_.size() - partial_suffix(buf_, kParamClose);
  const std::string_view value = std::string_view(buf_).substr(0, n);
  emit_args(out, param_string_ ? json_escape(value) : std::string(value));
  if (at == std::string::npos) {
    buf_.erase(0, n);
    return false;
  }
  buf_.erase(0, at + kParamClose.size());
  if (param_string_) emit_args(out, "\"");
  state_ = State::kParams;
  return true;
}

bool ToolCallParser::step(std::vector<ToolCallEvent>& out) {
  switch (state_) {
    case State::kText:
      return step_text(out);
    case State::kBetweenCalls:
      return step_between_calls(out);
    case State::kCallHead:
      return step_call_head(out);
    case State::kArgsRaw:
      return step_args_raw(out);
    case State::kArgsAfter:
      return step_args_after(out);
    case State::kParams:
      return step_params(out);
    case State::kParamValue:
      return step_param_value(out);
    case State::kDone:
      buf_.clear();
      return false;
  }
  return false;
}

std::vector<ToolCallEvent> ToolCallParser::push(std::string_view text) {
  std::vector<ToolCallEvent> out;
  if (!syntax_) {
    if (!text.empty()) out.push_back({ToolCallEvent::Kind::kContent, 0, std::string(text)});
    return out;
  }
  buf_ += text;
  while (step(out)) {
  }
  return out;
}

std::vector<ToolCallEvent> ToolCallParser::flush() {
  std::vector<ToolCallEvent> out;
  if (!syntax_) return out;
  while (step(out)) {
  }
  switch (state_) {
    case State::kText:
      emit_content(out, buf_, true);
      buf_.clear();
      break;
    case State::kBetweenCalls:  // the block's closing marker may be missing at EOS
      skip_ws(buf_);
      if (!syntax_->block_close.starts_with(buf_)) fail("unexpected text after the tool calls: " + buf_);
      break;
    case State::kDone:
      break;
    default:
      fail(calls_.empty() ? "the output ended inside a tool-call block"
                          : "the output ended inside the call to '" + calls_.back().name + "'");
  }
  return out;
}

ToolCallParser::Whole ToolCallParser::parse(std::string_view text, ToolCallFormat format) {
  ToolCallParser p(format);
  Whole w;
  std::vector<ToolCallEvent> events = p.push(text);
  for (ToolCallEvent& e : p.flush()) events.push_back(std::move(e));
  for (const ToolCallEvent& e : events) {
    if (e.kind == ToolCallEvent::Kind::kContent) w.content += e.text;
  }
  w.calls = p.calls();
  w.error = p.error();
  return w;
}

}  // namespace ds
