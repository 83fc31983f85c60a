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

static bool any_key_matches(const ServerContext& ctx, std::string_view got) {
  bool ok = !ctx.opts.api_key.empty() && key_matches(ctx.opts.api_key, got);
  for (const std::string& k : ctx.opts.api_keys) ok = key_matches(k, got) || ok;  // no early exit
  return ok;
}

static bool authorized(const ServerContext& ctx, const HttpRequest& req) {
  if (ctx.opts.api_key.empty() && ctx.opts.api_keys.empty()) return true;
  if (auto it = req.headers.find("authorization"); it != req.headers.end()) {
    std::string_view v = it->second;
    if (v.size() > 7 && (v.substr(0, 7) == "Bearer " || v.substr(0, 7) == "bearer ")) {
      if (any_key_matches(ctx, v.substr(7))) return true;
    }
  }
  if (auto it = req.headers.find("x-api-key"); it != req.headers.end()) {
    if (any_key_matches(ctx, it->second)) return true;
  }
  return false;
}

// CORS (llama-server answers any origin by default): the allowed origin for this request,
// or "" when its Origin is not on the --cors-origins list.
static std::string cors_origin(const ServerContext& ctx, const std::map<std::string, std::string>& headers) {
  const auto it = headers.find("origin");
  const std::string origin = it == headers.end() ? "" : it->second;
  if (ctx.opts.cors_origins == "*") return origin.empty() ? "*" : origin;
  size_t start = 0;
  while (start <= ctx.opts.cors_origins.size()) {
    size_t end = ctx.opts.cors_origins.find(',', start);
    if (end == std::string::npos) end = ctx.opts.cors_origins.size();
    std::string o = ctx.opts.cors_origins.substr(start, end - start);
    o.erase(0, o.find_first_not_of(' '));
    o.erase(o.find_last_not_of(' ') + 1);
    if (!o.empty() && o == origin) return origin;
    start = end + 1;
  }
  return "";
}

}  // namespace api

void add_cors_headers(const ServerContext& ctx, const std::map<std::string, std::string>& req_headers,
                      HttpResponse* r) {
  const std::string origin = api::cors_origin(ctx, req_headers);
  if (origin.empty()) return;
  r->headers.push_back({"Access-Control-Allow-Origin", origin});
  if (origin != "*") {
    r->headers.push_back({"Access-Control-Allow-Credentials", "true"});
    r->headers.push_back({"Vary", "Origin"});
  }
  r->headers.push_back({"Access-Control-Allow-Methods", "GET, POST, OPTIONS"});
  const auto asked = req_headers.find("access-control-request-headers");
  r->headers.push_back({"Access-Control-Allow-Headers",
                        asked != req_headers.end() ? asked->second : "Authorization, Content-Type, X-Api-Key"});
  r->headers.push_back({"Access-Control-Max-Age", "86400"});
}

namespace api {

static HttpResponse route_health(ServerContext& ctx, const HttpRequest&) {
  if (!ctx.ready) return make_error(Status::error(StatusCode::kUnavailable, "Loading model"), ctx.opts.retry_after_s);
  return json_response({{"status", "ok"}});
}

static HttpResponse route_props(ServerContext& ctx, const HttpRequest&) {
  const SchedOptions& so = ctx.loop->sched_options();
  const SamplingParams& d = ctx.opts.sampling;
  json params = {{"n_predict", ctx.opts.n_predict},
                 {"seed", ctx.opts.random_seed ? json(-1) : json(d.seed)},
                 {"temperature", d.temperature},
                 {"top_k", d.top_k},
                 {"top_p", d.top_p},
                 {"min_p", d.min_p},
                 {"typical_p", d.typical_p},
                 {"repeat_last_n", d.repeat_last_n},
                 {"repeat_penalty", d.repeat_penalty},
                 {"presence_penalty", d.presence_penalty},
                 {"frequency_penalty", d.frequency_penalty},
                 {"logit_bias", json::array()},
                 {"n_probs", d.n_probs}};
  json settings = {{"n_ctx", so.n_ctx},
                   {"n_predict", ctx.opts.n_predict},
                   {"temperature", d.temperature},
                   {"top_k", d.top_k},
                   {"top_p", d.top_p},
                   {"min_p", d.min_p},
                   {"typical_p", d.typical_p},
                   {"repeat_last_n", d.repeat_last_n},
                   {"repeat_penalty", d.repeat_penalty},
                   {"model", ctx.opts.model_alias},
                   {"params", params}};
  return json_response({{"default_generation_settings", settings},
                        {"total_slots", so.n_slots},
                        {"model_path", ctx.opts.model_path.empty() ? ctx.opts.model_alias : ctx.opts.model_path},
                        {"model_alias", ctx.opts.model_alias},
                        {"chat_template", ctx.codec->chat_template_name()},
                        {"build_info", ctx.opts.build_info},
                        {"n_ctx", so.n_ctx},
                        {"batch_tokens", so.batch_tokens},
                        {"max_queue", so.max_queue},
                        {"max_prompt_bytes", max_prompt_bytes(ctx)},
                        {"max_json_depth", kMaxJsonDepth}});
}

static HttpResponse route_slots(ServerContext& ctx, const HttpRequest&) {
  if (!ctx.opts.slots_endpoint)
    return make_error(Status::error(StatusCode::kUnimplemented, "This server does not serve /slots (--no-slots)"), 1);
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

static HttpResponse route_infill(ServerContext&, const HttpRequest&) {
  return make_error(
      Status::error(StatusCode::kUnimplemented,
                    "/infill (fill-in-the-middle) is out of scope for ds-server: it serves DeepSeek chat and "
                    "completion models; send the text to /completion instead"),
      1);
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
    {"POST", "/infill", route_infill, false},
    {"POST", "/tokenize", route_tokenize, true},
    {"POST", "/detokenize", route_detokenize, true},
    {"GET", "/props", route_props, true},
    {"GET", "/slots", route_slots, true},
    {"GET", "/metrics", route_metrics, true},
};

static HttpResponse dispatch(ServerContext& ctx, const HttpRequest& req) {
  // As in llama-server, the health check and the model list need no key.
  const bool open =
      req.path == "/health" || req.path == "/v1/health" || req.path == "/models" || req.path == "/v1/models";
  if (!open && !authorized(ctx, req)) {
    HttpResponse r =
        make_error(Status::error(StatusCode::kUnauthorized,
                                 "Invalid API Key: send it as 'Authorization: Bearer KEY' or 'X-Api-Key: KEY'"),
                   1);
    r.headers.push_back({"WWW-Authenticate", "Bearer"});  // RFC 6750, section 3
    return r;
  }
  bool path_known = false;
  for (const Route& r : kRoutes) {
    if (req.path != r.path) continue;
    path_known = true;
    if (req.method != r.method) continue;
    if (r.needs_model && !ctx.ready) {
      return make_error(Status::error(StatusCode::kUnavailable, "Loading model"), ctx.opts.retry_after_s);
    }
    if (req.body.size() > ctx.opts.max_body_bytes) {
      return make_error(Status::error(StatusCode::kTooLarge, "the request body is larger than " +
                                                                 std::to_string(ctx.opts.max_body_bytes) + " bytes"),
                        1);
    }
    return r.fn(ctx, req);
  }
  if (path_known) {
    HttpResponse e = error_response(405, "method " + req.method + " is not allowed on " + req.path, {});
    return e;
  }
  return make_error(Status::error(StatusCode::kNotFound, "File Not Found: no route for " + req.method + " " + req.path),
                    1);
}

}  // namespace api

HttpResponse handle_request(ServerContext& ctx, const HttpRequest& req) {
  ctx.counters.http_requests++;
  HttpResponse r;
  if (req.method == "OPTIONS") {  // a CORS preflight: answered without the API key
    r.status = 204;
    r.content_type = "text/plain";
    add_cors_headers(ctx, req.headers, &r);
    return r;
  }
  try {
    r = api::dispatch(ctx, req);
  } catch (const std::exception& e) {
    // The exception's text is for the log: it may name library internals.
    spdlog::error("internal error on {} {}: {}", req.method, req.path, e.what());
    r = api::make_error(Status::error(StatusCode::kInternal, "internal error"), 1);
  }
  add_cors_headers(ctx, req.headers, &r);
  if (r.status >= 500)
    ctx.counters.http_errors_5xx++;
  else if (r.status >= 400)
    ctx.counters.http_errors_4xx++;
  return r;
}

}  // namespace ds
