// API-layer tests on the fake engine and byte-level codec, without sockets: every route's
// documented fields, streaming == non-streaming text, stop strings, errors with their
// statuses and field names, API keys, the queue bound, and a client that goes away.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "fake_codec.h"
#include "fake_engine.h"
#include "server/api.h"

namespace ds::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

struct Sse {
  std::vector<json> events;
  bool done_marker = false;
};

Sse parse_sse(const std::string& s) {
  Sse out;
  size_t pos = 0;
  while (true) {
    const size_t end = s.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string ev = s.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    ev = ev.substr(6);
    if (ev == "[DONE]")
      out.done_marker = true;
    else
      out.events.push_back(json::parse(ev));
  }
  EXPECT_EQ(pos, s.size()) << "trailing bytes after the last event";
  return out;
}

class Api : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }
  void start(FakeEngineOptions eo, int n_slots = 4, int max_queue = 16, bool reasoning = false) {
    ctx_.reset();
    loop_.reset();
    engine_ = std::make_unique<FakeEngine>(eo);
    codec_ = std::make_unique<FakeCodec>(reasoning);
    LoopOptions lo;
    lo.sched = {.n_slots = n_slots, .batch_tokens = 64, .max_queue = max_queue, .n_ctx = eo.n_ctx};
    lo.is_eog = [](int32_t t) { return t == kFakeEos; };
    loop_ = std::make_unique<EngineLoop>(*engine_, lo);
    loop_->start();
    ctx_ = std::make_unique<ServerContext>();
    ctx_->opts.model_alias = "fake-model";
    ctx_->opts.n_ctx = eo.n_ctx;
    ctx_->opts.max_body_bytes = 1 << 16;
    ctx_->loop = loop_.get();
    ctx_->codec = codec_.get();
    ctx_->model = &engine_->info();
    ctx_->ready = true;
  }
  HttpResponse call(const std::string& method, const std::string& path, const std::string& body = "",
                    std::map<std::string, std::string> headers = {}) {
    HttpRequest r{
        .method = method, .path = path, .headers = std::move(headers), .body = body, .alive = [] { return true; }};
    return handle_request(*ctx_, r);
  }
  json post_json(const std::string& path, const json& body, int want_status = 200) {
    HttpResponse r = call("POST", path, body.dump());
    EXPECT_EQ(r.status, want_status) << r.body;
    EXPECT_FALSE(r.stream) << "expected a plain response";
    return json::parse(r.body);
  }
  // Runs a streaming response into a string; stop_after > 0 makes the client leave after
  // that many writes.
  std::string stream(const std::string& path, const json& body, int stop_after = 0) {
    HttpResponse r = call("POST", path, body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.content_type, "text/event-stream");
    if (!r.stream) return r.body;
    std::string out;
    int n_writes = 0;
    bool gone = false;
    StreamSink sink{.write =
                        [&](std::string_view s) {
                          if (stop_after > 0 && n_writes >= stop_after) return !(gone = true);
                          ++n_writes;
                          out.append(s);
                          return true;
                        },
                    .alive = [&] { return !gone; }};
    r.stream(sink);
    return out;
  }
  void expect_idle_kv() {
    for (int i = 0; i < 500 && loop_->stats().n_running + loop_->stats().n_waiting > 0; ++i) {
      std::this_thread::sleep_for(2ms);
    }
    EXPECT_EQ(loop_->stats().kv_blocks_used, 0);
  }
  void expect_error(const HttpResponse& r, int status, const std::string& needle, const std::string& type = "") {
    EXPECT_EQ(r.status, status) << r.body;
    json j = json::parse(r.body);
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_EQ(j["error"]["code"], status);
    EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
    if (!type.empty()) {
      EXPECT_EQ(j["error"]["type"], type);
    }
  }
  std::string greedy_text(const std::string& prompt, int n) {
    std::vector<int32_t> p{kFakeBos};
    for (unsigned char c : prompt) p.push_back(c);
    std::string s;
    for (int32_t t : FakeEngine::greedy(p, n, 2)) s += static_cast<char>(t);
    return s;
  }

  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<FakeCodec> codec_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<ServerContext> ctx_;
};

TEST_F(Api, CompletionNonStreamingFields) {
  json j =
      post_json("/completion", {{"prompt", "hello"}, {"n_predict", 20}, {"temperature", 0}, {"return_tokens", true}});
  EXPECT_EQ(j["content"], greedy_text("hello", 20));
  for (const char* k : {"content", "tokens", "stop", "model", "tokens_predicted", "tokens_evaluated", "tokens_cached",
                        "generation_settings", "stop_type", "stopping_word", "timings", "truncated"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["stop"], true);
  EXPECT_EQ(j["tokens_evaluated"], 6);
  EXPECT_EQ(j["tokens"].size(), j["tokens_predicted"].get<size_t>());
  for (const char* k :
       {"prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms", "predicted_per_second"}) {
    EXPECT_TRUE(j["timings"].contains(k)) << k;
  }
  EXPECT_TRUE(j["stop_type"] == "limit" || j["stop_type"] == "eos");
  // The alias route answers the same.
  json k = post_json("/completions", {{"prompt", "hello"}, {"n_predict", 20}, {"temperature", 0}});
  EXPECT_EQ(k["content"], j["content"]);
}

TEST_F(Api, StreamingConcatenatesToNonStreaming) {
  for (const std::string prompt : {"abc", "a much longer prompt with more words", "x"}) {
    json req = {{"prompt", prompt}, {"n_predict", 64}, {"temperature", 0}, {"stream", true}};
    Sse s = parse_sse(stream("/completion", req));
    ASSERT_GE(s.events.size(), 2u);
    std::string text;
    for (size_t i = 0; i + 1 < s.events.size(); ++i) {
      EXPECT_EQ(s.events[i]["stop"], false);
      text += s.events[i]["content"].get<std::string>();
    }
    const json& last = s.events.back();
    EXPECT_EQ(last["stop"], true);
    for (const char* k :
         {"stop_type", "stopping_word", "tokens_predicted", "tokens_evaluated", "tokens_cached", "timings"}) {
      EXPECT_TRUE(last.contains(k)) << k;
    }
    req["stream"] = false;
    EXPECT_EQ(text, post_json("/completion", req)["content"]) << prompt;
  }
  expect_idle_kv();
}

TEST_F(Api, StopStringsCutAndAreReported) {
  const std::string full = greedy_text("stop test", 60);
  ASSERT_GT(full.size(), 12u);
  const std::string word = full.substr(8, 3);
  json j = post_json("/completion", {{"prompt", "stop test"}, {"n_predict", 60}, {"temperature", 0}, {"stop", {word}}});
  EXPECT_EQ(j["content"], full.substr(0, full.find(word)));
  EXPECT_EQ(j["stop_type"], "word");
  EXPECT_EQ(j["stopping_word"], word);
  Sse s = parse_sse(
      stream("/completion",
             {{"prompt", "stop test"}, {"n_predict", 60}, {"temperature", 0}, {"stop", {word}}, {"stream", true}}));
  std::string text;
  for (auto& e : s.events) text += e["content"].get<std::string>();
  EXPECT_EQ(text, j["content"]);
  EXPECT_EQ(s.events.back()["stop_type"], "word");
  expect_idle_kv();
}

TEST_F(Api, StreamNeverSplitsUtf8) {
  // The fake model writes "é" as two tokens; every event must be valid UTF-8 on its own
  // (json::parse throws on invalid UTF-8).
  int n_multibyte = 0;
  for (int i = 0; i < 10; ++i) {
    Sse s = parse_sse(
        stream("/completion",
               {{"prompt", "utf8 " + std::to_string(i)}, {"n_predict", 80}, {"temperature", 0}, {"stream", true}}));
    for (auto& e : s.events) n_multibyte += e["content"].get<std::string>().find("\xC3\xA9") != std::string::npos;
  }
  EXPECT_GT(n_multibyte, 0);
}

TEST_F(Api, OpenAiCompletions) {
  json j = post_json("/v1/completions", {{"model", "x"}, {"prompt", "hello"}, {"max_tokens", 20}, {"temperature", 0}});
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], greedy_text("hello", 20));
  EXPECT_TRUE(j["choices"][0]["finish_reason"] == "length" || j["choices"][0]["finish_reason"] == "stop");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6);
  EXPECT_EQ(j["usage"]["total_tokens"],
            j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  Sse s = parse_sse(stream("/v1/completions", {{"prompt", "hello"},
                                               {"max_tokens", 20},
                                               {"temperature", 0},
                                               {"stream", true},
                                               {"stream_options", {{"include_usage", true}}}}));
  EXPECT_TRUE(s.done_marker);
  // The usage comes in a chunk of its own, after the finish_reason chunk.
  ASSERT_GE(s.events.size(), 2u);
  const json usage = s.events.back();
  s.events.pop_back();
  EXPECT_EQ(usage["choices"], json::array());
  std::string text;
  for (auto& e : s.events) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, j["choices"][0]["text"]);
  EXPECT_EQ(s.events.back()["choices"][0]["finish_reason"], j["choices"][0]["finish_reason"]);
  EXPECT_EQ(usage["usage"]["completion_tokens"], j["usage"]["completion_tokens"]);
}

TEST_F(Api, OpenAiChatWithReasoning) {
  start({}, 4, 16, /*reasoning=*/true);
  json msgs = json::array({{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", "hi"}}});
  json j = post_json("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 30}, {"temperature", 0}});
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  // The fake filter treats everything as reasoning until </think>, which the fake model never writes.
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"],
            greedy_text("<|system|>be brief<|user|>hi<|assistant|>", 30).substr(0));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 1 + std::string("<|system|>be brief<|user|>hi<|assistant|>").size());
  Sse s = parse_sse(
      stream("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 30}, {"temperature", 0}, {"stream", true}}));
  EXPECT_TRUE(s.done_marker);
  EXPECT_EQ(s.events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(s.events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string reasoning;
  for (auto& e : s.events) {
    const json& d = e["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, j["choices"][0]["message"]["reasoning_content"]);
  EXPECT_FALSE(s.events.back()["choices"][0]["finish_reason"].is_null());
  // Bad messages name the field.
  expect_error(call("POST", "/v1/chat/completions", R"({"messages":[{"role":"robot","content":"x"}]})"), 400, "robot");
  expect_error(call("POST", "/v1/chat/completions", R"({"messages":[{"content":"x"}]})"), 400, "messages[0].role");
  expect_error(call("POST", "/v1/chat/completions", R"({"messages":"hi"})"), 400, "messages");
}

TEST_F(Api, ModelsTokenizeDetokenizeHealthPropsSlotsMetrics) {
  json m = json::parse(call("GET", "/v1/models").body);
  EXPECT_EQ(m["data"][0]["id"], "fake-model");
  json t = post_json("/tokenize", {{"content", "ab"}});
  EXPECT_EQ(t["tokens"], json::array({97, 98}));
  t = post_json("/tokenize", {{"content", "ab"}, {"add_special", true}, {"with_pieces", true}});
  EXPECT_EQ(t["tokens"][0]["id"], 256);
  EXPECT_EQ(t["tokens"][1]["piece"], "a");
  EXPECT_EQ(post_json("/detokenize", {{"tokens", {104, 105}}})["content"], "hi");
  expect_error(call("POST", "/detokenize", R"({"tokens":[1,99999]})"), 400, "tokens");
  EXPECT_EQ(call("GET", "/health").status, 200);
  json p = json::parse(call("GET", "/props").body);
  EXPECT_EQ(p["total_slots"], 4);
  EXPECT_EQ(json::parse(call("GET", "/slots").body).size(), 4u);
  post_json("/completion", {{"prompt", "metrics"}, {"n_predict", 3}});
  HttpResponse r = call("GET", "/metrics");
  EXPECT_EQ(r.content_type.rfind("text/plain", 0), 0u);
  for (const char* k :
       {"ds_requests_total", "ds_generated_tokens_total", "ds_requests_waiting", "ds_kv_blocks_used",
        "ds_prompt_tokens_per_second", "ds_decode_tokens_per_second", "ds_time_to_first_token_seconds_bucket"}) {
    EXPECT_NE(r.body.find(k), std::string::npos) << k;
  }
}

TEST_F(Api, ValidationErrorsNameTheField) {
  expect_error(call("POST", "/completion", "{not json"), 400, "invalid JSON", "invalid_request_error");
  expect_error(call("POST", "/completion", "[1,2]"), 400, "JSON object");
  expect_error(call("POST", "/completion", R"({"n_predict":5})"), 400, "\"prompt\" is required");
  expect_error(call("POST", "/completion", R"({"prompt":"a","temperature":"hot"})"), 400, "\"temperature\"");
  expect_error(call("POST", "/completion", R"({"prompt":"a","n_predict":-5})"), 400, "\"n_predict\"");
  expect_error(call("POST", "/completion", R"({"prompt":"a","n_predict":1e15})"), 400, "\"n_predict\"");
  expect_error(call("POST", "/completion", R"({"prompt":"a","n_predict":"10"})"), 400, "\"n_predict\"");
  expect_error(call("POST", "/completion", R"({"prompt":"a","top_p":1.5})"), 400, "\"top_p\"");
  expect_error(call("POST", "/completion", R"({"prompt":"a","stream":"yes"})"), 400, "\"stream\"");
  expect_error(call("POST", "/completion", R"({"prompt":"a","stop":[1]})"), 400, "\"stop\"");
  expect_error(call("POST", "/completion", R"({"prompt":"a","logit_bias":[[99999,1]]})"), 400, "\"logit_bias\"");
  expect_error(call("POST", "/completion", R"({"prompt":{"a":1}})"), 400, "\"prompt\"");
  expect_error(call("POST", "/completion", R"({"prompt":[1,-4]})"), 400, "token id -4");
  EXPECT_EQ(post_json("/completion", {{"prompt", {{1}, {2}}}, {"n_predict", 2}}).size(), 2u);  // two prompts
  expect_error(call("POST", "/completion", "{\"prompt\":\"bad \xff utf8\"}"), 400, "invalid JSON");
  expect_error(call("POST", "/v1/completions", R"({"prompt":"a","n":17})"), 400, "\"n\"");
  // A huge n_predict that fits is accepted and limited by the context.
  json j = post_json("/completion", {{"prompt", "a"}, {"n_predict", 2147483647}, {"ignore_eos", true}});
  EXPECT_EQ(j["stop_type"], "limit");
  EXPECT_EQ(j["tokens_predicted"].get<int>() + j["tokens_evaluated"].get<int>(), 512);
  // Unknown fields are ignored (clients send many): the request succeeds.
  j = post_json("/completion", {{"prompt", "a"}, {"n_predict", 2}, {"some_future_field", {1, 2}}});
  EXPECT_EQ(j["tokens_predicted"].get<int>() <= 2, true);
  expect_idle_kv();
}

TEST_F(Api, PromptOverContextAndBodyTooLarge) {
  HttpResponse r = call("POST", "/completion", json{{"prompt", std::string(600, 'a')}}.dump());
  expect_error(r, 400, "context", "exceed_context_size_error");
  EXPECT_EQ(json::parse(r.body)["error"]["n_prompt_tokens"], 601);
  expect_error(call("POST", "/completion", json{{"prompt", std::string(70000, 'a')}}.dump()), 413, "larger");
  expect_error(call("GET", "/nope"), 404, "/nope", "not_found_error");
  expect_error(call("GET", "/completion"), 405, "GET");
}

TEST_F(Api, ApiKeyBearerOrHeaderHealthOpen) {
  ctx_->opts.api_key = "sekret";
  expect_error(call("GET", "/props"), 401, "API Key", "authentication_error");
  expect_error(call("GET", "/props", "", {{"authorization", "Bearer wrong"}}), 401, "API Key");
  EXPECT_EQ(call("GET", "/props", "", {{"authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(call("GET", "/props", "", {{"x-api-key", "sekret"}}).status, 200);
  EXPECT_EQ(call("GET", "/health").status, 200);
}

TEST_F(Api, LoadingGives503WithRetryAfter) {
  ctx_->ready = false;
  HttpResponse r = call("GET", "/health");
  expect_error(r, 503, "Loading", "unavailable_error");
  ASSERT_FALSE(r.headers.empty());
  EXPECT_EQ(r.headers[0].first, "Retry-After");
  expect_error(call("POST", "/completion", R"({"prompt":"a"})"), 503, "Loading");
}

TEST_F(Api, FullQueueGives503AndServerKeepsServing) {
  start({.step_delay = 2ms}, /*n_slots=*/1, /*max_queue=*/1);
  std::vector<std::thread> clients;
  std::atomic<int> n_503{0}, n_ok{0};
  for (int i = 0; i < 6; ++i) {
    clients.emplace_back([&, i] {
      HttpResponse r = call("POST", "/completion",
                            json{{"prompt", "q" + std::to_string(i)}, {"n_predict", 30}, {"ignore_eos", true}}.dump());
      if (r.status == 503) {
        ++n_503;
        EXPECT_EQ(r.headers.at(0).first, "Retry-After");
      } else {
        EXPECT_EQ(r.status, 200);
        ++n_ok;
      }
    });
    std::this_thread::sleep_for(1ms);
  }
  for (auto& c : clients) c.join();
  EXPECT_GE(n_503.load(), 1);
  EXPECT_GE(n_ok.load(), 2);
  EXPECT_EQ(post_json("/completion", {{"prompt", "after"}, {"n_predict", 3}})["stop"], true);
  expect_idle_kv();
}

TEST_F(Api, ClientLeavingMidStreamCancelsAndFreesKv) {
  start({.eos_percent = 0, .step_delay = 1ms});
  stream("/completion", {{"prompt", "long"}, {"n_predict", 100000}, {"ignore_eos", true}, {"stream", true}},
         /*stop_after=*/5);
  expect_idle_kv();
  EXPECT_EQ(loop_->stats().n_running, 0);
  // Non-streaming: alive() turns false while waiting.
  std::atomic<bool> alive{true};
  std::thread killer([&] {
    std::this_thread::sleep_for(30ms);
    alive = false;
  });
  HttpRequest r{.method = "POST",
                .path = "/completion",
                .headers = {},
                .body = json{{"prompt", "x"}, {"n_predict", 100000}, {"ignore_eos", true}}.dump(),
                .alive = [&] { return alive.load(); }};
  handle_request(*ctx_, r);
  killer.join();
  expect_idle_kv();
  EXPECT_EQ(ctx_->counters.client_disconnects.load(), 2);
}

// n choices and prompt arrays stream all their parts at once; a client that leaves ends
// every part and their KV blocks return.
TEST_F(Api, ClientLeavingMidStreamCancelsEveryChoice) {
  start({.eos_percent = 0, .step_delay = 1ms});
  const json msgs = {{{"role", "user"}, {"content", "long"}}};
  std::string out =
      stream("/v1/chat/completions",
             {{"messages", msgs}, {"n", 3}, {"max_tokens", 100000}, {"ignore_eos", true}, {"stream", true}},
             /*stop_after=*/8);
  EXPECT_EQ(out.find("[DONE]"), std::string::npos);
  expect_idle_kv();
  EXPECT_EQ(loop_->stats().n_running, 0);
  stream(
      "/completion",
      {{"prompt", json::array({"one", "two", "three"})}, {"n_predict", 100000}, {"ignore_eos", true}, {"stream", true}},
      /*stop_after=*/6);
  expect_idle_kv();
  EXPECT_EQ(loop_->stats().n_running, 0);
}

TEST_F(Api, RepeatedPromptReportsTokensCached) {
  const std::string prompt(100, 'p');
  json a = post_json("/completion", {{"prompt", prompt}, {"n_predict", 4}, {"temperature", 0}});
  json b = post_json("/completion", {{"prompt", prompt}, {"n_predict", 4}, {"temperature", 0}});
  EXPECT_EQ(a["tokens_cached"], 0);
  EXPECT_EQ(b["tokens_cached"], 96);  // 6 full blocks of 16
  EXPECT_EQ(b["timings"]["prompt_n"], 101 - 96);
  EXPECT_EQ(a["content"], b["content"]);
  json c =
      post_json("/completion", {{"prompt", prompt}, {"n_predict", 4}, {"temperature", 0}, {"cache_prompt", false}});
  EXPECT_EQ(c["tokens_cached"], 0);
}

TEST_F(Api, SeededSamplingIsReproducibleUnderLoad) {
  json req = {{"prompt", "seeded"}, {"n_predict", 40}, {"temperature", 1.0}, {"seed", 1234}};
  const json alone = post_json("/completion", req)["content"];
  std::vector<std::thread> noise;
  for (int i = 0; i < 6; ++i) {
    noise.emplace_back([&, i] {
      post_json("/completion", {{"prompt", "noise " + std::to_string(i)}, {"n_predict", 40}});
    });
  }
  EXPECT_EQ(post_json("/completion", req)["content"], alone);
  for (auto& t : noise) t.join();
  req["seed"] = 99;
  EXPECT_NE(post_json("/completion", req)["content"], alone);
}

TEST_F(Api, NProbsReported) {
  json j = post_json("/completion", {{"prompt", "probs"}, {"n_predict", 3}, {"temperature", 0}, {"n_probs", 3}});
  ASSERT_EQ(j["completion_probabilities"].size(), j["tokens_predicted"].get<size_t>());
  const json& first = j["completion_probabilities"][0];
  EXPECT_EQ(first["top_probs"].size(), 3u);
  EXPECT_EQ(first["top_probs"][0]["id"], first["id"]);  // greedy takes the most probable
}

TEST_F(Api, EngineFailureAfterStreamStartIsAnErrorEvent) {
  start({.eos_percent = 0, .step_delay = 1ms});
  HttpResponse r = call("POST", "/completion", json{{"prompt", "x"}, {"n_predict", 50}, {"stream", true}}.dump());
  std::string out;
  int n = 0;
  StreamSink sink{.write =
                      [&](std::string_view s) {
                        if (++n == 3) engine_->fail_next_step = true;
                        out.append(s);
                        return true;
                      },
                  .alive = [] { return true; }};
  r.stream(sink);
  Sse s = parse_sse(out);
  ASSERT_FALSE(s.events.empty());
  EXPECT_TRUE(s.events.back().contains("error"));
  EXPECT_EQ(s.events.back()["error"]["code"], 500);
  EXPECT_EQ(post_json("/completion", {{"prompt", "still ok"}, {"n_predict", 2}})["stop"], true);
}

}  // namespace
}  // namespace ds::test
