// An array of prompts on /completion and /v1/completions, and `n` > 1 on the OpenAI routes:
// one result per prompt or choice, in order (llama.cpp returns an array of result objects;
// OpenAI one choice per prompt or choice with its index). An array of strings or an array of
// token arrays is a batch; an array of token ids, or one mixing ids and strings, stays one
// prompt (parse_prompt).
//
// Each prompt or choice is a request of its own through the route, so every field and error
// applies per part (the first error is the answer; the other parts are cancelled), and the
// parts run at the same time (up to kMaxParallelParts): the scheduler batches them like any
// concurrent requests. Choice i has seed + i (or a random seed). The n choices of one prompt
// share its KV blocks through the prefix cache: the prompt is computed once first (a one-token
// run, whose full blocks enter the cache), then the n choices are submitted together and each
// takes those blocks instead of computing them again (choices admitted in one step would
// otherwise each compute the prompt, none of it cached yet).
//
// Streaming: the parts' streams are merged into one as their events come, interleaved: an
// OpenAI chunk carries its choice in choices[].index, a llama.cpp /completion event its
// prompt's position in `index`. One `data: [DONE]` ends an OpenAI stream, after every part
// ended; with stream_options.include_usage the parts' usage chunks are summed into one. A
// client that leaves ends every part (each sees its writes fail and cancels its request).
#include <atomic>
#include <limits>
#include <mutex>
#include <thread>

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

using Route = HttpResponse (*)(ServerContext&, const HttpRequest&);

// Parts of one request in flight at once: a long prompt array runs this many at a time, and
// a streamed one may hold at most this many prompts (all of its parts stream at once).
constexpr size_t kMaxParallelParts = 16;

// The parts' responses, in order. Non-streamed parts generate inside the route, so each runs
// on a thread of its own; a streamed part only submits there (its stream function generates),
// so those are submitted one after another without waiting. The connection's alive() is
// shared by the threads (it may write an interim response), so calls to it are serialized.
std::vector<HttpResponse> run_parts(ServerContext& ctx, const HttpRequest& req, const std::vector<json>& bodies,
                                    Route route, bool stream) {
  std::vector<HttpResponse> out(bodies.size());
  HttpRequest base = req;
  auto mu = std::make_shared<std::mutex>();
  base.alive = [mu, alive = req.alive] {
    std::lock_guard lk(*mu);
    return !alive || alive();
  };
  auto one = [&](size_t i) {
    HttpRequest r = base;
    r.body = dump(bodies[i]);
    out[i] = route(ctx, r);
  };
  if (stream) {
    for (size_t i = 0; i < bodies.size(); ++i) one(i);
    return out;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (size_t k = 0; k < std::min(bodies.size(), kMaxParallelParts); ++k) {
    threads.emplace_back([&] {
      for (size_t i; (i = next++) < bodies.size();) one(i);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// Ends parts that were submitted but will not be streamed (another part failed): their
// stream functions see a client that is gone and cancel their requests.
void cancel_streams(std::vector<HttpResponse>& parts) {
  StreamSink gone{.write = [](std::string_view) { return false; }, .alive = [] { return false; }};
  for (HttpResponse& p : parts) {
    if (p.stream) p.stream(gone);
  }
}

// The first failed part, after cancelling the others.
std::optional<HttpResponse> first_error(std::vector<HttpResponse>& parts) {
  for (HttpResponse& p : parts) {
    if (p.status == 200) continue;
    HttpResponse e = std::move(p);
    cancel_streams(parts);
    return e;
  }
  return std::nullopt;
}

enum class Shape { OPENAI, LLAMA };

// Merges the parts' SSE streams into `sink` (see the file comment). Part i's chunks get
// index base[i] + their own index (a part may itself hold several choices).
class StreamMerger {
 public:
  StreamMerger(StreamSink& sink, Shape shape, bool sum_prompts)
      : sink_(sink), shape_(shape), sum_prompts_(sum_prompts) {}

  StreamSink part(int64_t base) {
    return {.write = [this, base](std::string_view ev) { return write(base, ev); },
            .alive =
                [this] {
                  std::lock_guard lk(mu_);
                  return !gone_ && (!sink_.alive || sink_.alive());
                }};
  }

  // After every part ended.
  void finish() {
    if (gone_ || shape_ != Shape::OPENAI) return;
    if (!usage_.is_null()) {
      json u = usage_head_;
      u["id"] = id_;
      u["usage"] = usage_;
      sink_.write(sse_data(u));
    }
    sink_.write(sse_done());
  }

 private:
  bool write(int64_t base, std::string_view ev) {
    std::lock_guard lk(mu_);
    if (gone_) return false;
    constexpr std::string_view kData = "data: ";
    if (ev.substr(0, kData.size()) != kData || ev == sse_done()) return true;  // one [DONE] at the end
    json j = json::parse(ev.substr(kData.size()), nullptr, false);
    if (j.is_discarded()) return forward(ev);
    if (shape_ == Shape::LLAMA) {
      j["index"] = base + j.value("index", int64_t{0});
      return forward(sse_data(j));
    }
    if (j.contains("error")) return forward(ev);
    if (id_.empty() && j.contains("id")) id_ = j["id"].get<std::string>();
    if (j.contains("id")) j["id"] = id_;
    if (j.contains("usage") && j["choices"].empty()) {  // include_usage: summed at the end
      add_usage(j["usage"]);
      if (usage_head_.is_null()) usage_head_ = j;
      return true;
    }
    for (json& c : j["choices"]) c["index"] = base + c.value("index", int64_t{0});
    return forward(sse_data(j));
  }

  bool forward(std::string_view ev) {
    if (!sink_.write(ev)) gone_ = true;
    return !gone_;
  }

  // Choices of one prompt count the prompt once; prompts of a batch each count.
  void add_usage(const json& u) {
    const int64_t p = u.value("prompt_tokens", int64_t{0}), c = u.value("completion_tokens", int64_t{0});
    if (usage_.is_null())
      usage_ = u;
    else {
      if (sum_prompts_) usage_["prompt_tokens"] = usage_.value("prompt_tokens", int64_t{0}) + p;
      usage_["completion_tokens"] = usage_.value("completion_tokens", int64_t{0}) + c;
    }
    usage_["total_tokens"] = usage_.value("prompt_tokens", int64_t{0}) + usage_.value("completion_tokens", int64_t{0});
  }

  std::mutex mu_;
  StreamSink& sink_;
  Shape shape_;
  bool sum_prompts_;
  bool gone_ = false;
  std::string id_;
  json usage_ = nullptr, usage_head_ = nullptr;
};

// One streamed response made of the parts' streams; part i's indexes start at base[i].
HttpResponse merge_streams(std::vector<HttpResponse> parts, std::vector<int64_t> base, Shape shape, bool sum_prompts) {
  HttpResponse resp;
  resp.content_type = "text/event-stream";
  auto shared = std::make_shared<std::vector<HttpResponse>>(std::move(parts));
  resp.stream = [shared, base = std::move(base), shape, sum_prompts](StreamSink& sink) {
    StreamMerger merger(sink, shape, sum_prompts);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < shared->size(); ++i) {
      threads.emplace_back([&merger, &part = (*shared)[i], b = base[i]] {
        StreamSink s = merger.part(b);
        part.stream(s);
      });
    }
    for (auto& t : threads) t.join();
    merger.finish();
  };
  return resp;
}

Status check_streamed_batch(const json& body, bool stream) {
  if (!stream || body["prompt"].size() <= kMaxParallelParts) return Status::ok();
  return Status::invalid_argument("\"prompt\": a streamed request takes at most " + std::to_string(kMaxParallelParts) +
                                  " prompts");
}

std::vector<json> prompt_bodies(const json& body) {
  std::vector<json> out;
  for (const json& p : body["prompt"]) {
    json one = body;
    one["prompt"] = p;
    out.push_back(std::move(one));
  }
  return out;
}

}  // namespace

HttpResponse route_completion_batch(ServerContext& ctx, const HttpRequest& req, const json& body) {
  bool stream = false;
  if (Status st = get_bool(body, "stream", &stream); !st) return make_error(st, 1);
  if (Status st = check_streamed_batch(body, stream); !st) return make_error(st, 1);
  std::vector<HttpResponse> parts = run_parts(ctx, req, prompt_bodies(body), route_completion, stream);
  if (auto e = first_error(parts)) return *e;
  if (stream) {
    std::vector<int64_t> base(parts.size());
    for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<int64_t>(i);
    return merge_streams(std::move(parts), std::move(base), Shape::LLAMA, true);
  }
  json a = json::array();
  for (size_t i = 0; i < parts.size(); ++i) {
    json r = json::parse(parts[i].body);
    r["index"] = i;
    a.push_back(std::move(r));
  }
  return json_response(a);
}

HttpResponse route_oai_completions_batch(ServerContext& ctx, const HttpRequest& req, const json& body) {
  bool stream = false;
  if (Status st = get_bool(body, "stream", &stream); !st) return make_error(st, 1);
  int64_t n = 1;  // choices per prompt (route_oai_n checks the range)
  if (body.contains("n") && body["n"].is_number_integer()) n = std::max<int64_t>(1, body["n"].get<int64_t>());
  if (Status st = check_streamed_batch(body, stream); !st) return make_error(st, 1);
  std::vector<HttpResponse> parts = run_parts(ctx, req, prompt_bodies(body), route_oai_completions, stream);
  if (auto e = first_error(parts)) return *e;
  if (stream) {
    std::vector<int64_t> base(parts.size());
    for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<int64_t>(i) * n;
    return merge_streams(std::move(parts), std::move(base), Shape::OPENAI, true);
  }
  json j;
  int64_t prompt = 0, completion = 0, index = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    json r = json::parse(parts[i].body);
    if (i == 0) {
      j = r;
      j["choices"] = json::array();
    }
    for (json c : r["choices"]) {  // n choices per prompt
      c["index"] = index++;
      j["choices"].push_back(std::move(c));
    }
    prompt += r["usage"].value("prompt_tokens", int64_t{0});
    completion += r["usage"].value("completion_tokens", int64_t{0});
  }
  j["usage"] = {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
  j.erase("timings");
  return json_response(j);
}

HttpResponse route_oai_n(ServerContext& ctx, const HttpRequest& req, const json& body, Route route) {
  const json& nj = body["n"];
  if (!nj.is_number_integer() || nj.get<int64_t>() < 1 || nj.get<int64_t>() > kMaxChoices) {
    return make_error(Status::invalid_argument("\"n\" must be an integer from 1 to " + std::to_string(kMaxChoices)), 1);
  }
  const int n = nj.get<int>();
  bool stream = false, cache_prompt = true;
  if (Status st = get_bool(body, "stream", &stream); !st) return make_error(st, 1);
  if (Status st = get_bool(body, "cache_prompt", &cache_prompt); !st) return make_error(st, 1);
  int64_t seed = -1;
  if (Status st = get_int(body, "seed", -1, std::numeric_limits<int64_t>::max(), &seed); !st) return make_error(st, 1);
  json one = body;
  one["n"] = 1;
  if (n > 1 && cache_prompt) {
    // The prompt once, into the prefix cache; its errors (a bad field) are the request's.
    json warm = one;
    for (const char* k : {"max_completion_tokens", "n_predict", "logprobs", "top_logprobs", "stream_options"}) {
      warm.erase(k);
    }
    warm["stream"] = false;
    warm["max_tokens"] = 1;
    HttpRequest r = req;
    r.body = dump(warm);
    HttpResponse w = route(ctx, r);
    if (w.status != 200) return w;
  }
  std::vector<json> bodies;
  for (int i = 0; i < n; ++i) {
    if (seed >= 0) one["seed"] = seed + i;
    bodies.push_back(one);
  }
  std::vector<HttpResponse> parts = run_parts(ctx, req, bodies, route, stream);
  if (auto e = first_error(parts)) return *e;
  if (stream) {
    std::vector<int64_t> base(parts.size());
    for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<int64_t>(i);
    return merge_streams(std::move(parts), std::move(base), Shape::OPENAI, false);
  }
  json j;
  int64_t completion = 0;
  for (int i = 0; i < n; ++i) {
    json res = json::parse(parts[static_cast<size_t>(i)].body);
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
