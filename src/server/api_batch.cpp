// An array of prompts on /completion and /v1/completions: one result per prompt, in order
// (llama.cpp returns an array of result objects; OpenAI one choice per prompt with its
// index). An array of strings or an array of token arrays is a batch; an array of token ids,
// or one mixing ids and strings, stays one prompt (parse_prompt). Each prompt runs as its own
// request through the route, one after another, so every field and error applies per prompt;
// the first error ends the batch. Streaming takes one prompt.
//
// `n` > 1 on the OpenAI routes works the same way: the request runs n times with seeds
// seed, seed + 1, ... (or n random seeds), one after another, so the choices after the first
// take the prompt's KV blocks from the prefix cache instead of computing them again.
#include <limits>

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
  size_t index = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    for (json c : results[i]["choices"]) {  // n choices per prompt
      c["index"] = index++;
      j["choices"].push_back(std::move(c));
    }
    prompt += results[i]["usage"].value("prompt_tokens", int64_t{0});
    completion += results[i]["usage"].value("completion_tokens", int64_t{0});
  }
  j["usage"] = {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
  j.erase("timings");
  return json_response(j);
}

HttpResponse route_oai_n(ServerContext& ctx, const HttpRequest& req, const json& body,
                         HttpResponse (*route)(ServerContext&, const HttpRequest&)) {
  const json& nj = body["n"];
  if (!nj.is_number_integer() || nj.get<int64_t>() < 1 || nj.get<int64_t>() > kMaxChoices) {
    return make_error(err(400, "\"n\" must be an integer from 1 to " + std::to_string(kMaxChoices)), 1);
  }
  const int n = nj.get<int>();
  bool stream = false;
  if (auto e = get_bool(body, "stream", &stream)) return make_error(*e, 1);
  if (stream && n > 1) return make_error(err(400, "\"n\": streaming takes one choice (n = 1)"), 1);
  int64_t seed = -1;
  if (auto e = get_int(body, "seed", -1, std::numeric_limits<int64_t>::max(), &seed)) return make_error(*e, 1);
  json j;
  int64_t completion = 0;
  for (int i = 0; i < n; ++i) {
    json one = body;
    one["n"] = 1;
    if (seed >= 0) one["seed"] = seed + i;
    HttpRequest r = req;
    r.body = dump(one);
    HttpResponse resp = route(ctx, r);
    if (resp.status != 200) return resp;
    json res = json::parse(resp.body);
    completion += res["usage"].value("completion_tokens", int64_t{0});
    if (i == 0) {
      j = res;
      continue;
    }
    json c = res["choices"][0];
    c["index"] = i;
    j["choices"].push_back(std::move(c));
  }
  const int64_t prompt = j["usage"].value("prompt_tokens", int64_t{0});
  j["usage"]["completion_tokens"] = completion;
  j["usage"]["total_tokens"] = prompt + completion;
  j.erase("timings");
  return json_response(j);
}

}  // namespace ds::api
