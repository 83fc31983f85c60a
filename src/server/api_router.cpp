// Request dispatch: API-key check (/health stays open), the route table, loading state, and
// the small informational routes (/health, /props, /slots). Every error leaves here as
// {"error":{"code","message","type"}} with the matching HTTP status.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "server/api_internal.h"
#include "server/json_parse.h"

namespace ds {
namespace api {

static bool key_matches(const std::string& want, std::string_view got) {
  // Constant time in the key length, so a wrong key's timing does not leak its prefix.
  unsigned diff = want.size() != got.size();
  for (size_t i = 0; i < want.size(); ++i) diff |= want[i] ^ (i < got.size() ? got[i] : 0);
  return diff == 0;
}

static bool authorized(const ServerContext& ctx, const HttpRequest& req) {
  if (ctx.opts.api_key.empty()) return true;
  if (auto it = req.headers.find("authorization"); it != req.headers.end()) {
    std::string_view v = it->second;
    if (v.size() > 7 && (v.substr(0, 7) == "Bearer " || v.substr(0, 7) == "bearer ")) {
      if (key_matches(ctx.opts.api_key, v.substr(7))) return true;
    }
  }
  if (auto it = req.headers.find("x-api-key"); it != req.headers.end()) {
    if (key_matches(ctx.opts.api_key, it->second)) return true;
  }
  return false;
}

static HttpResponse route_health(ServerContext& ctx, const HttpRequest&) {
  if (!ctx.ready) return make_error(err(503, "Loading model"), ctx.opts.retry_after_s);
  return json_response({{"status", "ok"}});
}

static HttpResponse route_props(ServerContext& ctx, const HttpRequest&) {
  const SchedOptions& so = ctx.loop->sched_options();
  SamplingParams d;
  json settings = {{"n_ctx", so.n_ctx},
                   {"n_predict", -1},
                   {"temperature", d.temperature},
                   {"top_k", d.top_k},
                   {"top_p", d.top_p},
                   {"min_p", d.min_p},
                   {"typical_p", d.typical_p},
                   {"repeat_last_n", d.repeat_last_n},
                   {"repeat_penalty", d.repeat_penalty},
                   {"model", ctx.opts.model_alias}};
  return json_response({{"default_generation_settings", settings},
                        {"total_slots", so.n_slots},
                        {"model_path", ctx.opts.model_alias},
                        {"chat_template", ctx.codec->chat_template_name()},
                        {"build_info", ctx.opts.build_info},
                        {"n_ctx", so.n_ctx},
                        {"batch_tokens", so.batch_tokens},
                        {"max_queue", so.max_queue},
                        {"max_prompt_bytes", max_prompt_bytes(ctx)},
                        {"max_json_depth", kMaxJsonDepth}});
}

static HttpResponse route_slots(ServerContext& ctx, const HttpRequest&) {
  const LoopStats st = ctx.loop->stats();
  const SchedOptions& so = ctx.loop->sched_options();
  json slots = json::array();
  for (int s = 0; s < so.n_slots; ++s) {
    auto it = std::find_if(st.slots.begin(), st.slots.end(), [s](const LoopStats::Slot& x) { return x.seq_id == s; });
    json j = {{"id", s}, {"n_ctx", so.n_ctx}, {"is_processing", it != st.slots.end()}};
    if (it != st.slots.end()) {
      j["id_task"] = it->request_id;
      j["n_prompt_tokens"] = it->n_prompt;
      j["n_past"] = it->n_computed;
      j["n_decoded"] = it->n_generated;
      j["n_cached"] = it->n_cached;
    }
    slots.push_back(j);
  }
  return json_response(slots);
}

static HttpResponse route_metrics(ServerContext& ctx, const HttpRequest&) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_text(ctx);
  return r;
}

struct Route {
  const char* method;
  const char* path;
  HttpResponse (*fn)(ServerContext&, const HttpRequest&);
  bool needs_model;
};

static const Route kRoutes[] = {
    {"GET", "/health", route_health, false},
    {"GET", "/v1/health", route_health, false},
    {"POST", "/completion", route_completion, true},
    {"POST", "/completions", route_completion, true},
    {"POST", "/v1/completions", route_oai_completions, true},
    {"POST", "/v1/chat/completions", route_oai_chat, true},
    {"POST", "/chat/completions", route_oai_chat, true},
    {"GET", "/v1/models", route_oai_models, false},
    {"GET", "/models", route_oai_models, false},
    {"POST", "/apply-template", route_apply_template, true},
    {"POST", "/tokenize", route_tokenize, true},
    {"POST", "/detokenize", route_detokenize, true},
    {"GET", "/props", route_props, true},
    {"GET", "/slots", route_slots, true},
    {"GET", "/metrics", route_metrics, true},
};

static HttpResponse dispatch(ServerContext& ctx, const HttpRequest& req) {
  const bool open = req.path == "/health" || req.path == "/v1/health";
  if (!open && !authorized(ctx, req)) {
    HttpResponse r =
        make_error(err(401, "Invalid API Key: send it as 'Authorization: Bearer KEY' or 'X-Api-Key: KEY'"), 1);
    r.headers.push_back({"WWW-Authenticate", "Bearer"});  // RFC 6750, section 3
    return r;
  }
  bool path_known = false;
  for (const Route& r : kRoutes) {
    if (req.path != r.path) continue;
    path_known = true;
    if (req.method != r.method) continue;
    if (r.needs_model && !ctx.ready) {
      return make_error(err(503, "Loading model"), ctx.opts.retry_after_s);
    }
    if (req.body.size() > ctx.opts.max_body_bytes) {
      return make_error(
          err(413, "the request body is larger than " + std::to_string(ctx.opts.max_body_bytes) + " bytes"), 1);
    }
    return r.fn(ctx, req);
  }
  if (path_known) {
    HttpResponse e = make_error(err(405, "method " + req.method + " is not allowed on " + req.path), 1);
    return e;
  }
  return make_error(err(404, "File Not Found: no route for " + req.method + " " + req.path), 1);
}

}  // namespace api

HttpResponse handle_request(ServerContext& ctx, const HttpRequest& req) {
  ctx.counters.http_requests++;
  HttpResponse r;
  try {
    r = api::dispatch(ctx, req);
  } catch (const std::exception& e) {
    // The exception's text is for the log: it may name library internals.
    spdlog::error("internal error on {} {}: {}", req.method, req.path, e.what());
    r = api::make_error(api::err(500, "internal error"), 1);
  }
  if (r.status >= 500)
    ctx.counters.http_errors_5xx++;
  else if (r.status >= 400)
    ctx.counters.http_errors_4xx++;
  return r;
}

}  // namespace ds
