// ChatOutput: the reasoning filter first, then the tool-call parser over the content; its
// events become content text and per-call deltas (a new id with the name, then argument
// fragments). A forced call's prefill enters the parser like model output.
#include "server/chat_output.h"

#include <random>

namespace ds::api {

std::string new_tool_call_id() {
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

ChatOutput::ChatOutput(std::unique_ptr<ReasoningFilter> reasoning, ToolCallFormat format, bool parallel)
    : reasoning_(std::move(reasoning)),
      parser_(format, parallel ? 1 << 30 : 1),
      parse_(format != ToolCallFormat::kNone) {}

ChatOutput::Delta ChatOutput::from_content(std::string_view content, const std::string& reasoning, bool last) {
  Delta d;
  d.reasoning = utf8_reasoning_.push(reasoning) + (last ? utf8_reasoning_.flush() : "");
  raw_content_ += content;
  std::vector<ToolCallEvent> events;
  if (parse_) {
    events = parser_.push(content);
    if (last) {
      for (ToolCallEvent& e : parser_.flush()) events.push_back(std::move(e));
    }
  } else if (!content.empty()) {
    events.push_back({ToolCallEvent::Kind::kContent, 0, std::string(content)});
  }
  std::string text;
  for (ToolCallEvent& e : events) {
    switch (e.kind) {
      case ToolCallEvent::Kind::kContent:
        text += e.text;
        break;
      case ToolCallEvent::Kind::kCallBegin:
        ids_.push_back(new_tool_call_id());
        d.calls.push_back({.index = e.index, .id = ids_.back(), .name = std::move(e.text), .arguments = {}});
        break;
      case ToolCallEvent::Kind::kArguments:
        if (!d.calls.empty() && d.calls.back().index == e.index) {
          d.calls.back().arguments += e.text;
        } else {
          d.calls.push_back({.index = e.index, .id = {}, .name = {}, .arguments = std::move(e.text)});
        }
        break;
    }
  }
  d.content = utf8_content_.push(text) + (last ? utf8_content_.flush() : "");
  return d;
}

ChatOutput::Delta ChatOutput::prefill(std::string_view text) {
  return from_content(text, "", false);
}

ChatOutput::Delta ChatOutput::push(std::string_view text) {
  if (!reasoning_) return from_content(text, "", false);
  ReasoningFilter::Delta r = reasoning_->push(text);
  return from_content(r.content, r.reasoning, false);
}

ChatOutput::Delta ChatOutput::flush() {
  if (!reasoning_) return from_content("", "", true);
  ReasoningFilter::Delta r = reasoning_->flush();
  return from_content(r.content, r.reasoning, true);
}

}  // namespace ds::api
