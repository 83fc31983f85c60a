// An array of prompts on /completion and /v1/completions: one result per prompt, in order
// (llama.cpp returns an array of result objects; OpenAI one choice per prompt with its
// index). An array of strings or an array of token arrays is a batch; an array of token ids,
// or one mixing ids and strings, stays one prompt (parse_prompt). Each prompt runs as its own
// request through the route, one after another, so every field and error applies per prompt;
// the first error ends the batch. Streaming takes one prompt.
#include "server/api_internal.h"

namespace ds::api {

bool is_prompt_batch(const json& prompt) {
  if (!prompt.is_array() || prompt.size() < 2) return false;
  for (const json& p : prompt) {
    if (!p.is_string() && !p.is_array()) return false;
  }
  return true;
}

namespace {

// Runs `route` once per prompt; the responses (all 200) or the first error.
std::optional<HttpResponse> run_each(ServerContext& ctx, const HttpRequest& req, const json& body,
                                     HttpResponse (*route)(ServerContext&, const HttpRequest&), std::vector<json>* out) {
  bool stream = false;
  if (auto e = get_bool(body, "stream", &stream)) return make_error(*e, 1);
  if (stream) return make_error(err(400, "\"prompt\": streaming takes one prompt, not an array of prompts"), 1);
  for (const json& p : body["prompt"]) {
    json one = body;
    one["prompt"] = p;
    HttpRequest r = req;
    r.body = dump(one);
    HttpResponse resp = route(ctx, r);
    if (resp.status != 200) return resp;
    out->push_back(json::parse(resp.body));
  }
  return std::nullopt;
}

}  // namespace

HttpResponse route_completion_batch(ServerContext& ctx, const HttpRequest& req, const json& body) {
  std::vector<json> results;
  if (auto e = run_each(ctx, req, body, route_completion, &results)) return *e;
  json a = json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    results[i]["index"] = i;
    a.push_back(std::move(results[i]));
  }
  return json_response(a);
}

HttpResponse route_oai_completions_batch(ServerContext& ctx, const HttpRequest& req, const json& body) {
  std::vector<json> results;
  if (auto e = run_each(ctx, req, body, route_oai_completions, &results)) return *e;
  json j = results[0];
  j["choices"] = json::array();
  int64_t prompt = 0, completion = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    json c = results[i]["choices"][0];
    c["index"] = i;
    j["choices"].push_back(std::move(c));
    prompt += results[i]["usage"].value("prompt_tokens", int64_t{0});
    completion += results[i]["usage"].value("completion_tokens", int64_t{0});
  }
  j["usage"] = {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
  j.erase("timings");
  return json_response(j);
}

}  // namespace ds::api
