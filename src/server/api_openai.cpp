// OpenAI-compatible routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models,
// and llama.cpp's POST /apply-template. Same generation runner as /completion; only the JSON
// shapes differ. Chat messages are rendered with the model's chat template; the text between
// <think> and </think> is returned as `reasoning_content`, and tool calls written in the chat
// format's syntax as `tool_calls` (chat_output.h). Streams end with `data: [DONE]`.
#include <chrono>

#include "constrain/tool_call_grammar.h"
#include "server/api_internal.h"
#include "server/chat_output.h"
#include "server/chat_request.h"
#include "server/text_stream.h"

namespace ds::api {

static int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

static const char* finish_reason(const GenResult& g) {
  return g.stop_type == "limit" ? "length" : "stop";
}

static json usage_json(const GenResult& g) {
  return {{"prompt_tokens", g.stats.n_prompt},
          {"completion_tokens", g.stats.n_generated},
          {"total_tokens", g.stats.n_prompt + g.stats.n_generated},
          {"prompt_tokens_details", {{"cached_tokens", g.stats.n_cached}}}};
}

// stream_options.include_usage: the usage comes in a chunk of its own after the finish_reason
// chunk, with an empty choices array (OpenAI's and llama-server's shape).
static json usage_chunk(json head, const GenResult& g) {
  head["choices"] = json::array();
  head["usage"] = usage_json(g);
  return head;
}

// Fields both OpenAI routes share on top of the llama.cpp sampling fields.
static Status parse_openai_common(const json& body, ServerContext& ctx, CompletionRequest* r) {
  DS_RETURN_IF_ERROR(parse_sampling(body, ctx, r));
  int64_t n = 1, n_max = -2;
  if (!get_int(body, "n", 1, 1, &n).is_ok()) {
    return Status::invalid_argument("\"n\": only one choice per request is supported (n = 1)");
  }
  DS_RETURN_IF_ERROR(get_int(body, "max_completion_tokens", -1, INT32_MAX, &n_max));
  if (n_max != -2) r->gen.n_predict = static_cast<int>(n_max);
  // Chat: logprobs (bool) with top_logprobs 0-20; completions: logprobs k (0-20, the top k).
  int64_t logprobs = -1, top = 0;
  SamplingParams& sp = r->gen.sampling;
  if (body.contains("logprobs") && body["logprobs"].is_boolean()) {
    sp.logprobs = body["logprobs"].get<bool>();
    DS_RETURN_IF_ERROR(get_int(body, "top_logprobs", 0, 20, &top));
    if (!sp.logprobs && top > 0) return Status::invalid_argument("\"top_logprobs\" needs \"logprobs\": true");
    sp.top_logprobs = static_cast<int>(top);
  } else {
    DS_RETURN_IF_ERROR(get_int(body, "logprobs", 0, 20, &logprobs));
    sp.logprobs = logprobs >= 0;
    sp.top_logprobs = static_cast<int>(std::max<int64_t>(logprobs, 0));
  }
  bool echo = false;
  DS_RETURN_IF_ERROR(get_bool(body, "echo", &echo));
  if (echo) return Status::invalid_argument("\"echo\" is not supported");
  auto so = body.find("stream_options");
  if (so != body.end() && !so->is_null()) {
    if (!so->is_object()) return Status::invalid_argument("\"stream_options\" must be an object");
    DS_RETURN_IF_ERROR(get_bool(*so, "include_usage", &r->include_usage));
  }
  return Status::ok();
}

HttpResponse route_oai_completions(ServerContext& ctx, const HttpRequest& req) {
  json body;
  if (Status st = parse_body(req.body, &body); !st) return make_error(st, 1);
  auto r = std::make_shared<CompletionRequest>();
  if (!body.contains("prompt")) return make_error(Status::invalid_argument("\"prompt\" is required"), 1);
  if (is_prompt_batch(body["prompt"])) return route_oai_completions_batch(ctx, req, body);
  if (wants_choices(body)) return route_oai_n(ctx, req, body, route_oai_completions);
  if (Status st = parse_prompt(body["prompt"], ctx, &r->gen.prompt); !st) return make_error(st, 1);
  if (Status st = parse_openai_common(body, ctx, r.get()); !st) return make_error(st, 1);
  std::shared_ptr<GenStream> stream;
  if (Status st = submit(ctx, r->gen, &stream); !st) return make_error(st, ctx.opts.retry_after_s);
  const std::string id = "cmpl-" + std::to_string(stream->id());
  const int64_t created = unix_now();
  auto chunk = [&ctx, id, created](const std::string& text, const char* finish, json lp = nullptr) {
    return json{{"id", id},
                {"object", "text_completion"},
                {"created", created},
                {"model", ctx.opts.model_alias},
                {"system_fingerprint", ctx.opts.system_fingerprint},
                {"choices", json::array({{{"text", text},
                                          {"index", 0},
                                          {"logprobs", std::move(lp)},
                                          {"finish_reason", finish ? json(finish) : json(nullptr)}}})}};
  };
  if (!r->stream) {
    GenResult g = run_generation(ctx, *stream, *r, req.alive, {});
    log_request(ctx, "/v1/completions", stream->id(), g);
    if (!g.error.is_ok()) return make_error(g.error, 1);
    ctx.counters.completions_ok++;
    json j = chunk(g.content, finish_reason(g), completion_logprobs(*r, g.logprobs, 0));
    j["usage"] = usage_json(g);
    j["timings"] = timings_json(g.stats);
    return json_response(j);
  }
  HttpResponse resp;
  resp.content_type = "text/event-stream";
  resp.stream = [&ctx, r, stream, chunk](StreamSink& sink) {
    size_t offset = 0;  // text_offset of the piece's first token
    GenResult g = run_generation(ctx, *stream, *r, sink.alive, [&](const Piece& p) {
      json lp = completion_logprobs(*r, p.logprobs, offset);
      for (const json& e : p.logprobs) offset += e["bytes"].size();
      return sink.write(sse_data(chunk(p.text, nullptr, std::move(lp))));
    });
    log_request(ctx, "/v1/completions", stream->id(), g);
    if (g.client_gone) return;
    if (!g.error.is_ok()) {
      sink.write(sse_data(error_json(g.error)));
      return;
    }
    ctx.counters.completions_ok++;
    json last = chunk("", finish_reason(g));
    last["timings"] = timings_json(g.stats);
    sink.write(sse_data(last));
    if (r->include_usage) sink.write(sse_data(usage_chunk(chunk("", nullptr), g)));
    sink.write(sse_done());
  };
  return resp;
}

namespace {

struct ChatCall {
  std::shared_ptr<CompletionRequest> req;
  std::shared_ptr<GenStream> stream;
  std::shared_ptr<ChatRequest> chat;
  std::shared_ptr<ChatOutput> output;
  std::string prefill;  // the forced call's opener, already in the prompt
  std::string id;
  std::string route;  // as sent: /v1/chat/completions or /chat/completions
  int64_t created = 0;

  json head(const ServerContext& ctx, const char* object) const {
    return {{"id", id},
            {"object", object},
            {"created", created},
            {"model", ctx.opts.model_alias},
            {"system_fingerprint", ctx.opts.system_fingerprint}};
  }
};

// Calls that came out well formed (and, when forced, validate against their tool's schema);
// otherwise the reason they are not returned as calls.
std::string check_calls(const ChatCall& call) {
  const ChatOutput& out = *call.output;
  if (!out.error().empty()) return out.error();
  if (!call.chat->forced) return "";
  if (out.calls().empty()) return "the output holds no tool call although tool_choice requires one";
  for (const ParsedToolCall& c : out.calls()) {
    const ToolCallConstraint::Tool* tool = nullptr;
    for (const auto& t : call.chat->forced->tools) {
      if (t.name == c.name) tool = &t;
    }
    if (!tool) return "the forced call names '" + c.name + "', which tool_choice does not allow";
    const std::string e = validate_arguments(json::parse(c.arguments), tool->parameters);
    if (!e.empty()) return "the forced call to '" + c.name + "' does not validate against its schema: " + e;
  }
  return "";
}

// A forced call that came out wrong is an error, except when max_tokens cut it off: that is
// finish_reason "length" with the text so far, as for any other output.
bool forced_call_failed(const ChatCall& call, const GenResult& g, const std::string& problem) {
  return call.chat->forced && !problem.empty() && g.stop_type != "limit";
}

const char* chat_finish_reason(const ChatCall& call, const GenResult& g) {
  const bool calls = !call.output->calls().empty() && call.output->error().empty();
  return calls ? "tool_calls" : finish_reason(g);
}

json tool_calls_json(const ChatOutput& out) {
  json a = json::array();
  for (size_t i = 0; i < out.calls().size(); ++i) {
    a.push_back({{"id", out.ids()[i]},
                 {"type", "function"},
                 {"function", {{"name", out.calls()[i].name}, {"arguments", out.calls()[i].arguments}}}});
  }
  return a;
}

HttpResponse chat_response(ServerContext& ctx, const ChatCall& call, const HttpRequest& http) {
  GenResult g = run_generation(ctx, *call.stream, *call.req, http.alive, {});
  log_request(ctx, call.route, call.stream->id(), g);
  if (!g.error.is_ok()) return make_error(g.error, 1);
  ChatOutput& out = *call.output;
  ChatOutput::Delta a = out.prefill(call.prefill), b = out.push(g.content), c = out.flush();
  const std::string problem = check_calls(call);
  if (forced_call_failed(call, g, problem)) return make_error(Status::error(StatusCode::kInternal, problem), 1);
  ctx.counters.completions_ok++;
  json msg = {{"role", "assistant"}, {"content", a.content + b.content + c.content}};
  const std::string reasoning = a.reasoning + b.reasoning + c.reasoning;
  if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
  if (!out.error().empty()) {
    msg["content"] = out.raw_content();  // malformed call markup: returned as text
  } else if (!out.calls().empty()) {
    if (msg["content"] == "") msg["content"] = nullptr;
    msg["tool_calls"] = tool_calls_json(out);
  }
  json j = call.head(ctx, "chat.completion");
  j["choices"] = json::array({{{"index", 0},
                               {"message", msg},
                               {"logprobs", chat_logprobs(*call.req, g.logprobs)},
                               {"finish_reason", chat_finish_reason(call, g)}}});
  j["usage"] = usage_json(g);
  j["timings"] = timings_json(g.stats);
  return json_response(j);
}

// OpenAI's streamed tool calls: the first delta of a call carries index, id, type and name
// with empty arguments; later deltas carry index and argument fragments.
json call_deltas_json(const std::vector<ChatOutput::CallDelta>& calls) {
  json a = json::array();
  for (const auto& c : calls) {
    if (!c.id.empty()) {
      a.push_back({{"index", c.index},
                   {"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", ""}}}});
    }
    if (!c.arguments.empty()) a.push_back({{"index", c.index}, {"function", {{"arguments", c.arguments}}}});
  }
  return a;
}

void chat_stream(ServerContext& ctx, const ChatCall& call, StreamSink& sink) {
  json pending_lp = json::array();  // logprobs of the piece being sent, given to its first chunk
  auto chunk = [&](json delta, const char* finish) {
    json j = call.head(ctx, "chat.completion.chunk");
    json lp = nullptr;
    if (!pending_lp.empty()) {
      lp = chat_logprobs(*call.req, pending_lp);
      pending_lp = json::array();
    }
    j["choices"] = json::array({{{"index", 0},
                                 {"delta", std::move(delta)},
                                 {"logprobs", std::move(lp)},
                                 {"finish_reason", finish ? json(finish) : json(nullptr)}}});
    return j;
  };
  auto send_delta = [&](const ChatOutput::Delta& d) {
    bool ok = true;
    if (!d.reasoning.empty()) ok = sink.write(sse_data(chunk({{"reasoning_content", d.reasoning}}, nullptr)));
    if (ok && !d.content.empty()) ok = sink.write(sse_data(chunk({{"content", d.content}}, nullptr)));
    for (const json& c : call_deltas_json(d.calls)) {
      if (ok) ok = sink.write(sse_data(chunk({{"tool_calls", json::array({c})}}, nullptr)));
    }
    return ok;
  };
  if (!sink.write(sse_data(chunk({{"role", "assistant"}, {"content", ""}}, nullptr))) ||
      !send_delta(call.output->prefill(call.prefill))) {
    call.stream->cancel();
    return;
  }
  GenResult g = run_generation(ctx, *call.stream, *call.req, sink.alive, [&](const Piece& p) {
    pending_lp.insert(pending_lp.end(), p.logprobs.begin(), p.logprobs.end());
    return send_delta(call.output->push(p.text));
  });
  log_request(ctx, call.route, call.stream->id(), g);
  if (g.client_gone) return;
  if (!g.error.is_ok()) {
    sink.write(sse_data(error_json(g.error)));
    return;
  }
  send_delta(call.output->flush());
  const std::string problem = check_calls(call);
  if (forced_call_failed(call, g, problem)) {
    sink.write(sse_data({{"error", {{"code", 500}, {"message", problem}, {"type", "server_error"}}}}));
    return;
  }
  ctx.counters.completions_ok++;
  json last = chunk(json::object(), chat_finish_reason(call, g));
  last["timings"] = timings_json(g.stats);
  sink.write(sse_data(last));
  if (call.req->include_usage) sink.write(sse_data(usage_chunk(call.head(ctx, "chat.completion.chunk"), g)));
  sink.write(sse_done());
}

// The request's chat fields rendered with the model's template.
Status render_request(const ServerContext& ctx, const json& body, ChatRequest* chat, std::string* prompt) {
  DS_RETURN_IF_ERROR(parse_chat_request(body, *ctx.codec, chat));
  auto text = ctx.codec->render_chat(chat->input);
  if (!text.is_ok()) return Status::invalid_argument("\"messages\": " + text.message());
  DS_RETURN_IF_ERROR(check_prompt_bytes(ctx, "messages", text->size()));
  *prompt = std::move(*text);
  return Status::ok();
}

}  // namespace

HttpResponse route_oai_chat(ServerContext& ctx, const HttpRequest& req) {
  json body;
  if (Status st = parse_body(req.body, &body); !st) return make_error(st, 1);
  if (wants_choices(body)) return route_oai_n(ctx, req, body, route_oai_chat);
  ChatCall call;
  call.chat = std::make_shared<ChatRequest>();
  std::string text;
  if (Status st = render_request(ctx, body, call.chat.get(), &text); !st) return make_error(st, 1);
  if (call.chat->forced) {
    text += forced_call_prefill(*call.chat, text);
    call.prefill = call.chat->forced->prefix;
  }
  call.req = std::make_shared<CompletionRequest>();
  auto ids = ctx.codec->encode(text, false, true);
  if (!ids.is_ok()) return make_error(Status::invalid_argument("\"messages\": " + ids.message()), 1);
  call.req->gen.prompt = std::move(*ids);
  if (Status st = parse_openai_common(body, ctx, call.req.get()); !st) return make_error(st, 1);
  if (call.chat->forced) {
    // The call's markup and arguments follow the tool's schema. A schema outside the supported
    // subset leaves the call unconstrained; its arguments are still checked afterwards.
    auto gbnf = constrain::tool_call_gbnf(*call.chat->forced);
    if (gbnf && !compile_constraint(gbnf.value(), *ctx.codec, "tools", &call.req->gen.sampling).is_ok()) {
      call.req->gen.sampling.constraint.reset();
    }
  } else if (call.chat->auto_calls && !call.req->gen.sampling.constraint) {
    // tool_choice auto: free text; a call the model opens is constrained from its trigger on
    // (constrain::auto_call_grammar). A response_format constraint takes precedence.
    const ToolCallConstraint& c = *call.chat->auto_calls;
    const std::string_view trigger = constrain::tool_call_trigger(c.format);
    const size_t at = c.prefix.find(trigger);
    auto gbnf = constrain::tool_call_gbnf(c, at == std::string::npos ? "" : c.prefix.substr(at + trigger.size()));
    if (at != std::string::npos && gbnf &&
        !compile_constraint(gbnf.value(), *ctx.codec, "tools", &call.req->gen.sampling, trigger).is_ok()) {
      call.req->gen.sampling.constraint.reset();
    }
  }
  if (Status st = submit(ctx, call.req->gen, &call.stream); !st) return make_error(st, ctx.opts.retry_after_s);
  call.id = "chatcmpl-" + std::to_string(call.stream->id());
  call.route = req.path;
  call.created = unix_now();
  call.output =
      std::make_shared<ChatOutput>(ctx.opts.reasoning_in_content ? nullptr : ctx.codec->reasoning_filter(text),
                                   call.chat->format, call.chat->parallel_tool_calls);
  if (!call.req->stream) return chat_response(ctx, call, req);
  HttpResponse resp;
  resp.content_type = "text/event-stream";
  resp.stream = [&ctx, call](StreamSink& sink) { chat_stream(ctx, call, sink); };
  return resp;
}

// llama.cpp's POST /apply-template: the chat request's prompt, rendered, not generated.
HttpResponse route_apply_template(ServerContext& ctx, const HttpRequest& req) {
  json body;
  if (Status st = parse_body(req.body, &body); !st) return make_error(st, 1);
  ChatRequest chat;
  std::string text;
  if (Status st = render_request(ctx, body, &chat, &text); !st) return make_error(st, 1);
  return json_response({{"prompt", text}});
}

HttpResponse route_oai_models(ServerContext& ctx, const HttpRequest&) {
  json model = {{"id", ctx.opts.model_alias}, {"object", "model"}, {"created", unix_now()}, {"owned_by", "ds-server"}};
  if (ctx.model) {
    model["meta"] = {{"n_vocab", ctx.model->n_vocab}, {"n_ctx_train", ctx.model->n_ctx_train},
                     {"n_embd", ctx.model->n_embd},   {"n_params", ctx.model->n_params},
                     {"size", ctx.model->file_bytes}, {"arch", ctx.model->arch}};
  }
  return json_response({{"object", "list"}, {"data", json::array({model})}});
}

}  // namespace ds::api
