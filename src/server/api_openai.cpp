// OpenAI-compatible routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models.
// Same generation runner as /completion; only the JSON shapes differ. Chat messages are
// rendered with the model's chat template; for R1-style models the text between <think> and
// </think> is returned as `reasoning_content`. Streams end with `data: [DONE]`.
#include <chrono>

#include "server/api_internal.h"
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

// Fields both OpenAI routes share on top of the llama.cpp sampling fields.
static std::optional<ApiError> parse_openai_common(const json& body, ServerContext& ctx, CompletionRequest* r) {
  if (auto e = parse_sampling(body, ctx, r)) return e;
  int64_t n = 1, n_max = -2;
  if (auto e = get_int(body, "n", 1, 1, &n)) {
    e->message = "\"n\": only one choice per request is supported (n = 1)";
    return e;
  }
  if (auto e = get_int(body, "max_completion_tokens", -1, INT32_MAX, &n_max)) return e;
  if (n_max != -2) r->gen.n_predict = static_cast<int>(n_max);
  int64_t logprobs = 0;
  if (body.contains("logprobs") && body["logprobs"].is_boolean()) {
    int64_t top = body["logprobs"].get<bool>() ? 1 : 0;
    if (auto e = get_int(body, "top_logprobs", 0, 20, &top)) return e;
    r->gen.sampling.n_probs = static_cast<int>(std::max<int64_t>(top, body["logprobs"].get<bool>()));
  } else {
    if (auto e = get_int(body, "logprobs", 0, 20, &logprobs)) return e;
    if (logprobs > 0) r->gen.sampling.n_probs = static_cast<int>(logprobs);
  }
  bool echo = false;
  if (auto e = get_bool(body, "echo", &echo)) return e;
  if (echo) return err(400, "\"echo\" is not supported");
  auto so = body.find("stream_options");
  if (so != body.end() && !so->is_null()) {
    if (!so->is_object()) return err(400, "\"stream_options\" must be an object");
    if (auto e = get_bool(*so, "include_usage", &r->include_usage)) return e;
  }
  return std::nullopt;
}

HttpResponse route_oai_completions(ServerContext& ctx, const HttpRequest& req) {
  json body;
  if (auto e = parse_body(req.body, &body)) return make_error(*e, 1);
  auto r = std::make_shared<CompletionRequest>();
  if (!body.contains("prompt")) return make_error(err(400, "\"prompt\" is required"), 1);
  if (auto e = parse_prompt(body["prompt"], ctx, &r->gen.prompt)) return make_error(*e, 1);
  if (auto e = parse_openai_common(body, ctx, r.get())) return make_error(*e, 1);
  std::shared_ptr<GenStream> stream;
  if (auto e = submit(ctx, r->gen, &stream)) return make_error(*e, ctx.opts.retry_after_s);
  const std::string id = "cmpl-" + std::to_string(stream->id());
  const int64_t created = unix_now();
  auto chunk = [&ctx, id, created](const std::string& text, const char* finish) {
    return json{{"id", id},
                {"object", "text_completion"},
                {"created", created},
                {"model", ctx.opts.model_alias},
                {"choices", json::array({{{"text", text},
                                          {"index", 0},
                                          {"logprobs", nullptr},
                                          {"finish_reason", finish ? json(finish) : json(nullptr)}}})}};
  };
  if (!r->stream) {
    GenResult g = run_generation(ctx, *stream, *r, req.alive, {});
    log_request(ctx, "/v1/completions", stream->id(), g);
    if (g.error) return make_error(*g.error, 1);
    ctx.counters.completions_ok++;
    json j = chunk(g.content, finish_reason(g));
    j["usage"] = usage_json(g);
    j["timings"] = timings_json(g.stats);
    return json_response(j);
  }
  HttpResponse resp;
  resp.content_type = "text/event-stream";
  resp.stream = [&ctx, r, stream, chunk](StreamSink& sink) {
    GenResult g = run_generation(ctx, *stream, *r, sink.alive,
                                 [&](const Piece& p) { return sink.write(sse_data(chunk(p.text, nullptr))); });
    log_request(ctx, "/v1/completions", stream->id(), g);
    if (g.client_gone) return;
    if (g.error) {
      sink.write(sse_data({{"error", {{"code", 500}, {"message", g.error->message}, {"type", "server_error"}}}}));
      return;
    }
    ctx.counters.completions_ok++;
    json last = chunk("", finish_reason(g));
    if (r->include_usage) last["usage"] = usage_json(g);
    sink.write(sse_data(last));
    sink.write(sse_done());
  };
  return resp;
}

static std::optional<ApiError> parse_messages(const json& body, std::vector<ApiChatMessage>* out) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) {
    return err(400, "\"messages\" must be a non-empty array of {role, content}");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string where = "\"messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return err(400, where + ".role\" must be a string");
    }
    ApiChatMessage msg{.role = m["role"].get<std::string>(), .content = {}};
    const json c = m.value("content", json(nullptr));
    if (c.is_string()) {
      msg.content = c.get<std::string>();
    } else if (c.is_array()) {  // [{"type":"text","text":...}, ...]
      for (const json& part : c) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
          return err(400, where + ".content\" parts must be {\"type\":\"text\",\"text\":...}");
        }
        msg.content += part["text"].get<std::string>();
      }
    } else if (!c.is_null()) {
      return err(400, where + ".content\" must be a string or an array of text parts");
    }
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

namespace {

struct ChatCall {
  std::shared_ptr<CompletionRequest> req;
  std::shared_ptr<GenStream> stream;
  std::shared_ptr<ReasoningFilter> filter;  // null: the chat format has no reasoning
  std::string id;
  int64_t created = 0;

  json head(const ServerContext& ctx, const char* object) const {
    return {{"id", id}, {"object", object}, {"created", created}, {"model", ctx.opts.model_alias}};
  }
};

HttpResponse chat_response(ServerContext& ctx, const ChatCall& call, const HttpRequest& http) {
  GenResult g = run_generation(ctx, *call.stream, *call.req, http.alive, {});
  log_request(ctx, "/v1/chat/completions", call.stream->id(), g);
  if (g.error) return make_error(*g.error, 1);
  ctx.counters.completions_ok++;
  json msg = {{"role", "assistant"}, {"content", g.content}};
  if (call.filter) {
    ReasoningFilter::Delta d = call.filter->push(g.content), f = call.filter->flush();
    msg["content"] = d.content + f.content;
    const std::string reasoning = d.reasoning + f.reasoning;
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
  }
  json j = call.head(ctx, "chat.completion");
  j["choices"] =
      json::array({{{"index", 0}, {"message", msg}, {"logprobs", nullptr}, {"finish_reason", finish_reason(g)}}});
  j["usage"] = usage_json(g);
  j["timings"] = timings_json(g.stats);
  return json_response(j);
}

void chat_stream(ServerContext& ctx, const ChatCall& call, StreamSink& sink) {
  auto chunk = [&](json delta, const char* finish) {
    json j = call.head(ctx, "chat.completion.chunk");
    j["choices"] = json::array({{{"index", 0},
                                 {"delta", std::move(delta)},
                                 {"logprobs", nullptr},
                                 {"finish_reason", finish ? json(finish) : json(nullptr)}}});
    return j;
  };
  // The reasoning splitter may cut text anywhere: re-join UTF-8 characters per field.
  StopTextStream utf8_reasoning({}), utf8_content({});
  auto send_delta = [&](const ReasoningFilter::Delta& d, bool last = false) {
    const std::string reasoning = utf8_reasoning.push(d.reasoning) + (last ? utf8_reasoning.flush() : "");
    const std::string content = utf8_content.push(d.content) + (last ? utf8_content.flush() : "");
    bool ok = true;
    if (!reasoning.empty()) ok = sink.write(sse_data(chunk({{"reasoning_content", reasoning}}, nullptr)));
    if (ok && !content.empty()) ok = sink.write(sse_data(chunk({{"content", content}}, nullptr)));
    return ok;
  };
  if (!sink.write(sse_data(chunk({{"role", "assistant"}, {"content", ""}}, nullptr)))) {
    call.stream->cancel();
    return;
  }
  GenResult g = run_generation(ctx, *call.stream, *call.req, sink.alive, [&](const Piece& p) {
    return send_delta(call.filter ? call.filter->push(p.text)
                                  : ReasoningFilter::Delta{.reasoning = {}, .content = p.text});
  });
  log_request(ctx, "/v1/chat/completions", call.stream->id(), g);
  if (g.client_gone) return;
  if (g.error) {
    sink.write(sse_data({{"error", {{"code", 500}, {"message", g.error->message}, {"type", "server_error"}}}}));
    return;
  }
  send_delta(call.filter ? call.filter->flush() : ReasoningFilter::Delta{}, true);
  ctx.counters.completions_ok++;
  json last = chunk(json::object(), finish_reason(g));
  if (call.req->include_usage) last["usage"] = usage_json(g);
  sink.write(sse_data(last));
  sink.write(sse_done());
}

}  // namespace

HttpResponse route_oai_chat(ServerContext& ctx, const HttpRequest& req) {
  json body;
  if (auto e = parse_body(req.body, &body)) return make_error(*e, 1);
  std::vector<ApiChatMessage> msgs;
  if (auto e = parse_messages(body, &msgs)) return make_error(*e, 1);
  auto text = ctx.codec->render_chat(msgs, true);
  if (!text.is_ok()) return make_error(err(400, "\"messages\": " + text.message()), 1);
  if (auto e = check_prompt_bytes(ctx, "messages", text->size())) return make_error(*e, 1);
  ChatCall call;
  call.req = std::make_shared<CompletionRequest>();
  auto ids = ctx.codec->encode(*text, false, true);
  if (!ids.is_ok()) return make_error(err(400, "\"messages\": " + ids.message()), 1);
  call.req->gen.prompt = std::move(*ids);
  if (auto e = parse_openai_common(body, ctx, call.req.get())) return make_error(*e, 1);
  if (auto e = submit(ctx, call.req->gen, &call.stream)) return make_error(*e, ctx.opts.retry_after_s);
  call.id = "chatcmpl-" + std::to_string(call.stream->id());
  call.created = unix_now();
  call.filter = ctx.codec->reasoning_filter();
  if (!call.req->stream) return chat_response(ctx, call, req);
  HttpResponse resp;
  resp.content_type = "text/event-stream";
  resp.stream = [&ctx, call](StreamSink& sink) { chat_stream(ctx, call, sink); };
  return resp;
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
