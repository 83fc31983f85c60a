// llama-server compatibility of the API layer, on the fake engine and byte-level codec: CORS,
// the public model list, the fields llama-server writes (system_fingerprint, timings,
// the usage chunk, stream tokens, truncated, cache_n, prompt, id_slot, generation_settings,
// /props model_path and params), server-wide sampling defaults, logit_bias keyed by text,
// /infill's 501, --no-slots, --reasoning-format none, and prefix reuse down to the token.
#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <thread>

#include "fake_codec.h"
#include "fake_engine.h"
#include "server/api.h"

namespace ds::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::vector<json> sse_events(const std::string& s, bool* done) {
  std::vector<json> out;
  size_t pos = 0;
  *done = false;
  while (true) {
    const size_t end = s.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string ev = s.substr(pos + 6, end - pos - 6);  // after "data: "
    pos = end + 2;
    if (ev == "[DONE]")
      *done = true;
    else
      out.push_back(json::parse(ev));
  }
  return out;
}

std::string header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

class ApiCompat : public ::testing::Test {
 protected:
  void SetUp() override { start(false); }
  void start(bool reasoning) {
    ctx_.reset();
    loop_.reset();
    engine_ = std::make_unique<FakeEngine>(FakeEngineOptions{});
    codec_ = std::make_unique<FakeCodec>(reasoning);
    LoopOptions lo;
    lo.sched = {.n_slots = 4, .batch_tokens = 64, .max_queue = 16, .n_ctx = 512};
    lo.is_eog = [](int32_t t) { return t == kFakeEos; };
    loop_ = std::make_unique<EngineLoop>(*engine_, lo);
    loop_->start();
    ctx_ = std::make_unique<ServerContext>();
    ctx_->opts.model_alias = "fake-model";
    ctx_->opts.n_ctx = 512;
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
  json post(const std::string& path, const json& body) {
    HttpResponse r = call("POST", path, body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }
  std::vector<json> stream(const std::string& path, const json& body, bool* done) {
    HttpResponse r = call("POST", path, body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    std::string out;
    StreamSink sink{.write =
                        [&](std::string_view s) {
                          out.append(s);
                          return true;
                        },
                    .alive = [] { return true; }};
    if (r.stream) r.stream(sink);
    return sse_events(out, done);
  }
  static std::string greedy_text(const std::string& prompt, int n) {
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

TEST_F(ApiCompat, CorsPreflightNeedsNoKeyAndEveryResponseHasTheHeaders) {
  ctx_->opts.api_key = "sekret";
  HttpResponse pre = call("OPTIONS", "/v1/chat/completions", "",
                          {{"origin", "https://app.example"},
                           {"access-control-request-method", "POST"},
                           {"access-control-request-headers", "authorization, content-type"}});
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(header(pre, "Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_NE(header(pre, "Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(header(pre, "Access-Control-Allow-Headers"), "authorization, content-type");
  // Every response carries them: a success, an error, a refusal for a missing key.
  EXPECT_EQ(header(call("GET", "/health", "", {{"origin", "https://app.example"}}), "Access-Control-Allow-Origin"),
            "https://app.example");
  EXPECT_EQ(header(call("GET", "/health"), "Access-Control-Allow-Origin"), "*");
  HttpResponse denied = call("GET", "/props", "", {{"origin", "https://app.example"}});
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(header(denied, "Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_FALSE(header(call("GET", "/nope"), "Access-Control-Allow-Methods").empty());
  // --cors-origins restricts: listed origins are echoed, others get no Allow-Origin.
  ctx_->opts.cors_origins = "https://a.example, https://b.example";
  EXPECT_EQ(
      header(call("OPTIONS", "/completion", "", {{"origin", "https://b.example"}}), "Access-Control-Allow-Origin"),
      "https://b.example");
  EXPECT_EQ(
      header(call("OPTIONS", "/completion", "", {{"origin", "https://c.example"}}), "Access-Control-Allow-Origin"), "");
  EXPECT_EQ(header(call("GET", "/health", "", {{"origin", "https://evil.example"}}), "Access-Control-Allow-Origin"),
            "");
}

TEST_F(ApiCompat, ModelListIsPublicAndExtraKeysWork) {
  ctx_->opts.api_key = "sekret";
  ctx_->opts.api_keys = {"second", "third"};
  EXPECT_EQ(call("GET", "/v1/models").status, 200);
  EXPECT_EQ(call("GET", "/models").status, 200);
  EXPECT_EQ(call("GET", "/props").status, 401);
  EXPECT_EQ(call("GET", "/props", "", {{"authorization", "Bearer third"}}).status, 200);
  EXPECT_EQ(call("GET", "/props", "", {{"x-api-key", "second"}}).status, 200);
  EXPECT_EQ(call("GET", "/props", "", {{"x-api-key", "fourth"}}).status, 401);
}

TEST_F(ApiCompat, OpenAiFingerprintTimingsAndUsageChunk) {
  for (const std::string route : {"/v1/completions", "/v1/chat/completions"}) {
    json req = {{"max_tokens", 12}, {"temperature", 0}};
    if (route == "/v1/completions")
      req["prompt"] = "hello";
    else
      req["messages"] = json::array({{{"role", "user"}, {"content", "hello"}}});
    json j = post(route, req);
    EXPECT_FALSE(j["system_fingerprint"].get<std::string>().empty()) << route;
    EXPECT_TRUE(j["timings"].contains("predicted_n")) << route;
    EXPECT_EQ(j["timings"]["predicted_n"], j["usage"]["completion_tokens"]) << route;
    req["stream"] = true;
    req["stream_options"] = {{"include_usage", true}};
    bool done = false;
    std::vector<json> ev = stream(route, req, &done);
    EXPECT_TRUE(done);
    ASSERT_GE(ev.size(), 3u) << route;
    for (const json& e : ev) EXPECT_EQ(e["system_fingerprint"], j["system_fingerprint"]) << route;
    const json& usage = ev.back();
    const json& finish = ev[ev.size() - 2];
    EXPECT_EQ(usage["choices"], json::array()) << route;
    EXPECT_EQ(usage["usage"]["completion_tokens"], j["usage"]["completion_tokens"]) << route;
    EXPECT_EQ(usage["usage"]["prompt_tokens"], j["usage"]["prompt_tokens"]) << route;
    EXPECT_FALSE(finish["choices"][0]["finish_reason"].is_null()) << route;
    EXPECT_FALSE(finish.contains("usage")) << route;
    EXPECT_EQ(finish["timings"]["predicted_n"], j["usage"]["completion_tokens"]) << route;
    // Without include_usage there is no usage chunk.
    req.erase("stream_options");
    ev = stream(route, req, &done);
    for (const json& e : ev) EXPECT_FALSE(e.contains("usage")) << route;
  }
}

TEST_F(ApiCompat, CompletionStreamChunksCarryTheirTokens) {
  json req = {{"prompt", "tokens please"}, {"n_predict", 30}, {"temperature", 0}, {"return_tokens", true}};
  json whole = post("/completion", req);
  req["stream"] = true;
  req.erase("return_tokens");
  bool done = false;
  std::vector<json> ev = stream("/completion", req, &done);
  std::vector<int32_t> tokens;
  std::string text;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    EXPECT_FALSE(ev[i]["tokens"].empty()) << ev[i];
    for (const json& t : ev[i]["tokens"]) tokens.push_back(t.get<int32_t>());
    text += ev[i]["content"].get<std::string>();
  }
  EXPECT_EQ(json(tokens), whole["tokens"]);
  EXPECT_EQ(text, whole["content"]);
}

TEST_F(ApiCompat, FinalObjectFieldsAsLlamaServerWritesThem) {
  json j = post("/completion", {{"prompt", "hello"},
                                {"n_predict", 5},
                                {"temperature", 0},
                                {"logit_bias", json::array({json::array({120, 2.5}), json::array({121, false})})}});
  EXPECT_EQ(j["prompt"], "<s>hello");
  EXPECT_GE(j["id_slot"].get<int>(), 0);
  EXPECT_LT(j["id_slot"].get<int>(), 4);
  EXPECT_EQ(j["timings"]["cache_n"], j["tokens_cached"]);
  EXPECT_EQ(j["truncated"], false);  // stopped by n_predict (or EOS), not by the context
  const json& g = j["generation_settings"];
  for (const char* k : {"n_ctx", "n_predict", "seed", "temperature", "top_k", "top_p", "min_p", "typical_p",
                        "repeat_last_n", "repeat_penalty", "presence_penalty", "frequency_penalty", "ignore_eos",
                        "n_probs", "logit_bias", "stop", "stream", "cache_prompt"}) {
    EXPECT_TRUE(g.contains(k)) << k;
  }
  EXPECT_EQ(g["logit_bias"], json::parse("[[120, 2.5], [121, false]]"));
  // The context fills: truncated.
  json t = post("/completion", {{"prompt", "a"}, {"n_predict", 100000}, {"ignore_eos", true}});
  EXPECT_EQ(t["stop_type"], "limit");
  EXPECT_EQ(t["truncated"], true);
}

TEST_F(ApiCompat, ServerDefaultsApplyAndRequestsOverrideThem) {
  ctx_->opts.model_path = "/models/fake.gguf";
  ctx_->opts.sampling.temperature = 0;
  ctx_->opts.sampling.top_k = 7;
  ctx_->opts.n_predict = 6;
  ctx_->opts.sampling.seed = 99;
  ctx_->opts.random_seed = false;
  json p = json::parse(call("GET", "/props").body);
  EXPECT_EQ(p["model_path"], "/models/fake.gguf");
  const json& params = p["default_generation_settings"]["params"];
  EXPECT_EQ(params["temperature"], 0.0);
  EXPECT_EQ(params["top_k"], 7);
  EXPECT_EQ(params["n_predict"], 6);
  EXPECT_EQ(params["seed"], 99);
  json j = post("/completion", {{"prompt", "defaults"}});
  EXPECT_EQ(j["generation_settings"]["top_k"], 7);
  EXPECT_EQ(j["generation_settings"]["n_predict"], 6);
  EXPECT_EQ(j["generation_settings"]["seed"], 99);
  EXPECT_LE(j["tokens_predicted"].get<int>(), 6);
  EXPECT_EQ(j["content"], greedy_text("defaults", 6));  // temperature 0 by default: greedy
  json k = post("/completion", {{"prompt", "defaults"}, {"n_predict", 9}, {"top_k", 3}, {"seed", 5}});
  EXPECT_EQ(k["generation_settings"]["top_k"], 3);
  EXPECT_EQ(k["generation_settings"]["n_predict"], 9);
  EXPECT_EQ(k["generation_settings"]["seed"], 5);
}

TEST_F(ApiCompat, LogitBiasKeyedByTextAppliesToEachOfItsTokens) {
  // A prompt whose greedy output starts with a letter (the fake model also writes bytes of "é").
  std::string prompt, full;
  for (int i = 0; i < 50 && (full.empty() || !std::isalpha(static_cast<unsigned char>(full[0]))); ++i) {
    prompt = "bias " + std::to_string(i);
    full = greedy_text(prompt, 10);
  }
  ASSERT_TRUE(!full.empty() && std::isalpha(static_cast<unsigned char>(full[0]))) << full;
  const std::string first(1, full[0]);
  // Banning the text of the greedy first token changes the first token.
  for (const json& bias : {json::array({json::array({first, false})}), json{{first, -1e9}}}) {
    json j = post("/completion", {{"prompt", prompt}, {"n_predict", 10}, {"temperature", 0}, {"logit_bias", bias}});
    ASSERT_FALSE(j["content"].get<std::string>().empty());
    EXPECT_NE(j["content"].get<std::string>()[0], full[0]) << bias;
  }
  // A text of two tokens biases both; an id given as a string stays an id.
  json j = post("/completion",
                {{"prompt", "bias"}, {"n_predict", 1}, {"logit_bias", json::array({json::array({"hi", 3.0})})}});
  EXPECT_EQ(j["generation_settings"]["logit_bias"], json::parse("[[104, 3.0], [105, 3.0]]"));
  j = post("/completion", {{"prompt", "bias"}, {"n_predict", 1}, {"logit_bias", {{"104", 1.5}}}});
  EXPECT_EQ(j["generation_settings"]["logit_bias"], json::parse("[[104, 1.5]]"));
  // In the array form a string is always text: "7" is the byte '7' (id 55), not id 7.
  j = post("/completion",
           {{"prompt", "bias"}, {"n_predict", 1}, {"logit_bias", json::array({json::array({"7", 1.0})})}});
  EXPECT_EQ(j["generation_settings"]["logit_bias"], json::parse("[[55, 1.0]]"));
}

TEST_F(ApiCompat, InfillIsOutOfScopeAndNoSlotsAnswers501) {
  HttpResponse r = call("POST", "/infill", R"({"input_prefix":"a","input_suffix":"b"})");
  EXPECT_EQ(r.status, 501);
  EXPECT_NE(json::parse(r.body)["error"]["message"].get<std::string>().find("out of scope"), std::string::npos);
  EXPECT_EQ(call("GET", "/slots").status, 200);
  ctx_->opts.slots_endpoint = false;
  r = call("GET", "/slots");
  EXPECT_EQ(r.status, 501);
  EXPECT_NE(r.body.find("--no-slots"), std::string::npos);
}

TEST_F(ApiCompat, ReasoningFormatNoneKeepsThinkingInContent) {
  start(/*reasoning=*/true);
  json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  json split = post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 20}, {"temperature", 0}});
  ASSERT_TRUE(split["choices"][0]["message"].contains("reasoning_content"));
  ctx_->opts.reasoning_in_content = true;
  json kept = post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 20}, {"temperature", 0}});
  EXPECT_FALSE(kept["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_EQ(kept["choices"][0]["message"]["content"], split["choices"][0]["message"]["reasoning_content"]);
}

TEST_F(ApiCompat, RepeatedPromptOf32TokensReports31Cached) {
  const std::string prompt(31, 'q');  // BOS + 31 bytes = 32 tokens, two full blocks of 16
  json a = post("/completion", {{"prompt", prompt}, {"n_predict", 8}, {"temperature", 0}});
  json b = post("/completion", {{"prompt", prompt}, {"n_predict", 8}, {"temperature", 0}});
  json c = post("/completion", {{"prompt", prompt}, {"n_predict", 8}, {"temperature", 0}, {"cache_prompt", false}});
  EXPECT_EQ(a["tokens_cached"], 0);
  EXPECT_EQ(b["tokens_cached"], 31);
  EXPECT_EQ(b["timings"]["cache_n"], 31);
  EXPECT_EQ(b["timings"]["prompt_n"], 1);
  EXPECT_EQ(c["tokens_cached"], 0);
  EXPECT_EQ(a["content"], greedy_text(prompt, 8));
  EXPECT_EQ(b["content"], a["content"]);
  EXPECT_EQ(c["content"], a["content"]);
}

}  // namespace
}  // namespace ds::test
