// Parsing and checking the chat fields of a request. OpenAI clients send a call's
// `arguments` as JSON text; it is parsed into an object here because the DeepSeek templates
// write arguments as JSON (R1-Distill-Qwen, V3.1) or one DSML parameter per key (V3.2, V4).
#include "server/chat_request.h"

#include <set>

#include "text/chat_template.h"

namespace ds::api {

namespace {

std::string quoted(const std::string& field) {
  return "\"" + field + "\"";
}

// content: a string, an array of text parts, or null.
Status parse_content(const json& m, const std::string& where, std::optional<std::string>* out) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return Status::ok();
  if (it->is_string()) {
    *out = it->get<std::string>();
    return Status::ok();
  }
  if (!it->is_array())
    return Status::invalid_argument(quoted(where + ".content") + " must be a string or an array of text parts");
  std::string text;
  for (const json& part : *it) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      return Status::invalid_argument(quoted(where + ".content") + " parts must be {\"type\":\"text\",\"text\":...}");
    }
    text += part["text"].get<std::string>();
  }
  *out = std::move(text);
  return Status::ok();
}

Status parse_tool_calls(const json& m, const std::string& where, ChatMessage* msg) {
  auto it = m.find("tool_calls");
  if (it == m.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return Status::invalid_argument(quoted(where + ".tool_calls") + " must be an array");
  for (size_t j = 0; j < it->size(); ++j) {
    const json& tc = (*it)[j];
    const std::string at = where + ".tool_calls[" + std::to_string(j) + "]";
    if (!tc.is_object()) return Status::invalid_argument(quoted(at) + " must be an object");
    ChatToolCall call;
    if (!get_string(tc, "id", &call.id).is_ok())
      return Status::invalid_argument(quoted(at + ".id") + " must be a string");
    if (!get_string(tc, "type", &call.type).is_ok())
      return Status::invalid_argument(quoted(at + ".type") + " must be a string");
    if (call.type != "function") return Status::invalid_argument(quoted(at + ".type") + " must be \"function\"");
    auto fn = tc.find("function");
    if (fn == tc.end() || !fn->is_object())
      return Status::invalid_argument(quoted(at + ".function") + " must be an object");
    if (!fn->contains("name") || !(*fn)["name"].is_string() || (*fn)["name"].get<std::string>().empty()) {
      return Status::invalid_argument(quoted(at + ".function.name") + " is required");
    }
    call.name = (*fn)["name"].get<std::string>();
    const json args = fn->value("arguments", json::object());
    if (args.is_string()) {
      json parsed = json::parse(args.get<std::string>(), nullptr, false);
      call.arguments = parsed.is_object() ? parsed : args;
    } else if (args.is_object()) {
      call.arguments = args;
    } else {
      return Status::invalid_argument(quoted(at + ".function.arguments") + " must be a JSON object or its text");
    }
    msg->tool_calls.push_back(std::move(call));
  }
  return Status::ok();
}

Status parse_messages(const json& body, std::vector<ChatMessage>* out) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) {
    return Status::invalid_argument("\"messages\" must be a non-empty array of {role, content}");
  }
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  std::set<std::string> call_ids;  // ids of the calls made so far
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return Status::invalid_argument(quoted(where + ".role") + " must be a string");
    }
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    if (!kRoles.contains(msg.role)) {
      return Status::invalid_argument(quoted(where + ".role") +
                                      " must be one of system, developer, user, assistant, tool (got '" + msg.role +
                                      "')");
    }
    DS_RETURN_IF_ERROR(parse_content(m, where, &msg.content));
    if (msg.role == "assistant") {
      if (m.contains("reasoning_content") && !m["reasoning_content"].is_null()) {
        if (!m["reasoning_content"].is_string()) {
          return Status::invalid_argument(quoted(where + ".reasoning_content") + " must be a string");
        }
        msg.reasoning_content = m["reasoning_content"].get<std::string>();
      }
      DS_RETURN_IF_ERROR(parse_tool_calls(m, where, &msg));
      if (!get_bool(m, "prefix", &msg.prefix).is_ok())
        return Status::invalid_argument(quoted(where + ".prefix") + " must be a bool");
      for (const ChatToolCall& c : msg.tool_calls) call_ids.insert(c.id);
    }
    if (msg.role == "tool") {
      auto id = m.find("tool_call_id");
      if (id == m.end() || !id->is_string()) {
        return Status::invalid_argument(quoted(where + ".tool_call_id") + " is required on a tool message");
      }
      msg.tool_call_id = id->get<std::string>();
      if (!call_ids.contains(msg.tool_call_id)) {
        return Status::invalid_argument(quoted(where + ".tool_call_id") + " '" + msg.tool_call_id +
                                        "' matches no tool call of an earlier assistant message");
      }
    }
    out->push_back(std::move(msg));
  }
  return Status::ok();
}

Status parse_tools(const json& body, json* out) {
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return Status::ok();
  if (!it->is_array())
    return Status::invalid_argument("\"tools\" must be an array of {\"type\": \"function\", \"function\": {...}}");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return Status::invalid_argument(quoted(at) + " must be an object");
    if (t.value("type", "") != "function")
      return Status::invalid_argument(quoted(at + ".type") + " must be \"function\"");
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object())
      return Status::invalid_argument(quoted(at + ".function") + " must be an object");
    if (!fn->contains("name") || !(*fn)["name"].is_string() || (*fn)["name"].get<std::string>().empty()) {
      return Status::invalid_argument(quoted(at + ".function.name") + " is required (a non-empty string)");
    }
    auto params = fn->find("parameters");
    if (params != fn->end() && !params->is_null()) {
      if (!params->is_object() || (params->contains("type") && (*params)["type"] != "object")) {
        return Status::invalid_argument(quoted(at + ".function.parameters") +
                                        " must be a JSON Schema of type \"object\"");
      }
    }
  }
  *out = *it;
  return Status::ok();
}

Status parse_tool_choice(const json& body, ChatRequest* r) {
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return Status::ok();
  const std::string expected =
      "\"tool_choice\" must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": "
      "...}}";
  if (it->is_string()) {
    const std::string s = it->get<std::string>();
    if (s == "auto")
      r->tool_choice = ToolChoice::kAuto;
    else if (s == "none")
      r->tool_choice = ToolChoice::kNone;
    else if (s == "required")
      r->tool_choice = ToolChoice::kRequired;
    else
      return Status::invalid_argument(expected + " (got '" + s + "')");
    return Status::ok();
  }
  if (!it->is_object() || it->value("type", "") != "function" || !it->contains("function") ||
      !(*it)["function"].is_object() || !(*it)["function"].contains("name") || !(*it)["function"]["name"].is_string()) {
    return Status::invalid_argument(expected);
  }
  r->tool_choice = ToolChoice::kNamed;
  r->tool_name = (*it)["function"]["name"].get<std::string>();
  return Status::ok();
}

Status parse_bool_field(const json& j, const char* key, const std::string& path, std::optional<bool>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean()) return Status::invalid_argument(quoted(path) + " must be true or false");
  *out = it->get<bool>();
  return Status::ok();
}

Status parse_effort(const json& v, const std::string& path, std::optional<std::string>* out) {
  static const std::set<std::string> kLevels = {"minimal", "low", "medium", "high", "max"};
  if (v.is_null()) return Status::ok();
  if (!v.is_string() || !kLevels.contains(v.get<std::string>())) {
    return Status::invalid_argument(quoted(path) + " must be one of minimal, low, medium, high, max");
  }
  *out = v.get<std::string>();
  return Status::ok();
}

// chat_template_kwargs first, then DeepSeek's own fields where the kwargs left a gap.
Status parse_switches(const json& body, ChatInput* in) {
  auto kw = body.find("chat_template_kwargs");
  if (kw != body.end() && !kw->is_null()) {
    if (!kw->is_object()) return Status::invalid_argument("\"chat_template_kwargs\" must be an object");
    DS_RETURN_IF_ERROR(parse_bool_field(*kw, "thinking", "chat_template_kwargs.thinking", &in->thinking));
    DS_RETURN_IF_ERROR(
        parse_bool_field(*kw, "enable_thinking", "chat_template_kwargs.enable_thinking", &in->enable_thinking));
    std::optional<bool> drop;
    DS_RETURN_IF_ERROR(parse_bool_field(*kw, "drop_thinking", "chat_template_kwargs.drop_thinking", &drop));
    if (drop) in->drop_thinking = *drop;
    if (kw->contains("reasoning_effort")) {
      DS_RETURN_IF_ERROR(
          parse_effort((*kw)["reasoning_effort"], "chat_template_kwargs.reasoning_effort", &in->reasoning_effort));
    }
  }
  auto th = body.find("thinking");
  if (th != body.end() && !th->is_null()) {
    const std::string type = th->is_object() ? th->value("type", "") : "";
    if (type != "enabled" && type != "disabled") {
      return Status::invalid_argument("\"thinking\" must be {\"type\": \"enabled\"} or {\"type\": \"disabled\"}");
    }
    if (!in->thinking) in->thinking = type == "enabled";
    if (!in->enable_thinking) in->enable_thinking = type == "enabled";
  }
  if (body.contains("reasoning_effort") && !in->reasoning_effort) {
    DS_RETURN_IF_ERROR(parse_effort(body["reasoning_effort"], "reasoning_effort", &in->reasoning_effort));
  }
  // V4 templates write a JSON response format into the system prompt.
  auto rf = body.find("response_format");
  if (rf != body.end() && rf->is_object()) {
    const std::string type = rf->value("type", "");
    if (type == "json_object" || type == "json_schema") in->response_format = *rf;
  }
  return Status::ok();
}

const json* find_tool(const json& tools, const std::string& name) {
  for (const json& t : tools) {
    if (t["function"]["name"] == name) return &t;
  }
  return nullptr;
}

}  // namespace

Status parse_chat_request(const json& body, const TextCodec& codec, ChatRequest* r) {
  DS_RETURN_IF_ERROR(parse_messages(body, &r->input.messages));
  DS_RETURN_IF_ERROR(parse_tools(body, &r->input.tools));
  DS_RETURN_IF_ERROR(parse_tool_choice(body, r));
  DS_RETURN_IF_ERROR(get_bool(body, "parallel_tool_calls", &r->parallel_tool_calls));
  DS_RETURN_IF_ERROR(parse_switches(body, &r->input));
  DS_RETURN_IF_ERROR(get_bool(body, "add_generation_prompt", &r->input.add_generation_prompt));
  const bool has_tools = r->input.tools.is_array() && !r->input.tools.empty();
  if (!has_tools && (r->tool_choice == ToolChoice::kRequired || r->tool_choice == ToolChoice::kNamed)) {
    return Status::invalid_argument("\"tool_choice\" requires a call, but the request has no \"tools\"");
  }
  if (r->tool_choice == ToolChoice::kNamed && !find_tool(r->input.tools, r->tool_name)) {
    return Status::invalid_argument("\"tool_choice.function.name\" '" + r->tool_name + "' is not one of the \"tools\"");
  }
  if (!has_tools) return Status::ok();
  if (r->tool_choice == ToolChoice::kNone) {
    r->input.tools = nullptr;  // the model is not offered the tools
    return Status::ok();
  }
  r->format = codec.tool_call_format();
  if (r->format == ToolCallFormat::kNone) {
    return Status::invalid_argument(
        "\"tools\": the chat format '" + codec.chat_template_name() +
        "' has no tool-call syntax; choose one that has with --chat-template (deepseek-r1-distill-qwen, "
        "deepseek-v3.1, deepseek-v3.2, deepseek-v4, ...)");
  }
  ToolCallConstraint c;
  c.format = r->format;
  c.parallel = r->parallel_tool_calls;
  for (const json& t : r->input.tools) {
    const std::string name = t["function"]["name"].get<std::string>();
    if (r->tool_choice == ToolChoice::kNamed && name != r->tool_name) continue;
    c.tools.push_back({name, t["function"].value("parameters", json::object())});
  }
  c.prefix = tool_call_opener(r->format, r->tool_choice == ToolChoice::kNamed ? r->tool_name : "");
  if (r->tool_choice == ToolChoice::kAuto) {
    r->auto_calls = std::move(c);
  } else {
    r->forced = std::move(c);
  }
  return Status::ok();
}

std::string forced_call_prefill(const ChatRequest& r, std::string_view prompt) {
  if (!r.forced) return "";
  std::string close;
  if (ChatTemplate::opens_reasoning(prompt)) close = r.format == ToolCallFormat::kR1 ? "\n</think>\n\n" : "</think>";
  return close + r.forced->prefix;
}

std::string validate_arguments(const json& v, const json& schema, const std::string& path) {
  if (!schema.is_object()) return "";
  auto type_ok = [&](const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "integer")
      return v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<int64_t>(v.get<double>()));
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    return true;  // an unknown type name is not checked
  };
  if (auto t = schema.find("type"); t != schema.end()) {
    bool ok = false;
    if (t->is_string()) ok = type_ok(t->get<std::string>());
    if (t->is_array()) {
      for (const json& x : *t) ok = ok || (x.is_string() && type_ok(x.get<std::string>()));
    }
    if (!t->is_string() && !t->is_array()) ok = true;
    if (!ok) return path + " must be of type " + chat_tojson(*t) + " (got " + chat_tojson(v) + ")";
  }
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
    bool found = false;
    for (const json& x : *e) found = found || x == v;
    if (!found) return path + " must be one of " + chat_tojson(*e) + " (got " + chat_tojson(v) + ")";
  }
  if (v.is_object()) {
    if (auto req = schema.find("required"); req != schema.end() && req->is_array()) {
      for (const json& k : *req) {
        if (k.is_string() && !v.contains(k.get<std::string>()))
          return path + "." + k.get<std::string>() + " is required";
      }
    }
    if (auto props = schema.find("properties"); props != schema.end() && props->is_object()) {
      for (const auto& [k, x] : v.items()) {
        if (props->contains(k)) {
          std::string e = validate_arguments(x, (*props)[k], path + "." + k);
          if (!e.empty()) return e;
        } else if (schema.value("additionalProperties", json(true)) == json(false)) {
          return path + "." + k + " is not a property of the schema";
        }
      }
    }
  }
  if (v.is_array()) {
    if (auto items = schema.find("items"); items != schema.end()) {
      for (size_t i = 0; i < v.size(); ++i) {
        std::string e = validate_arguments(v[i], *items, path + "[" + std::to_string(i) + "]");
        if (!e.empty()) return e;
      }
    }
  }
  return "";
}

}  // namespace ds::api
