// End-to-end tests of the real ds-server binary on the ../shared/refdata models, over HTTP
// on 127.0.0.1 only, with bounded loops: documented fields of every generation route,
// greedy output == `ds-cli generate`, 16 concurrent streams == each alone, clear errors for
// bad requests with the server still serving and the KV cache back to zero when idle, a
// full queue, a prompt over the context, a client hanging up, the prefix cache, n choices
// run together, API keys, --mlock (locked weights, or exit 1 naming the limit), and a clean
// exit 0 on SIGTERM.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "server_process.h"
#include "test_util.h"

namespace ds::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::string model_path(const std::string& name) {
  return shared_path("refdata/" + name);
}

json post(int port, const std::string& path, const json& body, int want = 200) {
  RawResponse r = raw_request(port, "POST", path, body.dump());
  EXPECT_EQ(r.status, want) << path << " " << body.dump() << " -> " << r.body;
  try {
    return json::parse(r.body);
  } catch (...) {
    ADD_FAILURE() << "not JSON: " << r.body;
    return json();
  }
}

std::vector<json> sse_events(const std::string& body, bool* done = nullptr) {
  std::vector<json> out;
  size_t pos = 0;
  while (true) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    if (ev == "data: [DONE]") {
      if (done) *done = true;
      continue;
    }
    out.push_back(json::parse(ev.substr(6)));
  }
  return out;
}

std::string stream_text(int port, const json& body) {
  RawResponse r = raw_request(port, "POST", "/completion", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  std::string text;
  for (const json& e : sse_events(r.body)) text += e.value("content", "");
  return text;
}

double metric(int port, const std::string& name) {
  RawResponse r = raw_request(port, "GET", "/metrics", "");
  std::smatch m;
  if (!std::regex_search(r.body, m, std::regex("\n" + name + " ([0-9.e+-]+)"))) return -1;
  return std::stod(m[1]);
}

// Waits (bounded) until no request runs or waits and no KV block is held by a request.
void expect_idle_kv(int port) {
  for (int i = 0; i < 200; ++i) {
    if (metric(port, "ds_requests_running") == 0 && metric(port, "ds_requests_waiting") == 0 &&
        metric(port, "ds_kv_blocks_used") == 0) {
      return;
    }
    std::this_thread::sleep_for(50ms);
  }
  ADD_FAILURE() << "the server did not become idle: running " << metric(port, "ds_requests_running")
                << ", KV blocks used " << metric(port, "ds_kv_blocks_used");
}

void expect_error(const RawResponse& r, int status, const std::string& needle, const std::string& type = "") {
  EXPECT_EQ(r.status, status) << r.body;
  json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  EXPECT_EQ(j["error"]["code"], status);
  EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  if (!type.empty()) {
    EXPECT_EQ(j["error"]["type"], type);
  }
}

class ServerE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess();
    server_->start({"--model", model_path("tiny-llama-Q4_K_M.gguf"), "--parallel", "4", "--ctx-per-seq", "512",
                    "--batch-tokens", "64", "--threads", "2", "--chat-template", "deepseek-r1"});
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->stop(), 0) << server_->log();
    delete server_;
  }
  int port() const { return server_->port(); }
  static ServerProcess* server_;
};
ServerProcess* ServerE2E::server_ = nullptr;

TEST_F(ServerE2E, CompletionFieldsStreamingAndNot) {
  const json req = {
      {"prompt", "The capital of France"}, {"n_predict", 24}, {"temperature", 0}, {"return_tokens", true}};
  json j = post(port(), "/completion", req);
  for (const char* k : {"content", "tokens", "stop", "model", "tokens_predicted", "tokens_evaluated", "tokens_cached",
                        "generation_settings", "stop_type", "stopping_word", "timings"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  for (const char* k :
       {"prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms", "predicted_per_second"}) {
    EXPECT_TRUE(j["timings"].contains(k)) << k;
  }
  EXPECT_EQ(j["tokens"].size(), j["tokens_predicted"].get<size_t>());
  json s = req;
  s["stream"] = true;
  RawResponse r = raw_request(port(), "POST", "/completion", s.dump());
  EXPECT_NE(r.headers.find("text/event-stream"), std::string::npos);
  std::vector<json> ev = sse_events(r.body);
  ASSERT_GE(ev.size(), 2u);
  std::string text;
  std::vector<int> tokens;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["stop"], false);
    text += ev[i]["content"].get<std::string>();
    for (auto& t : ev[i]["tokens"]) tokens.push_back(t.get<int>());
  }
  const json& last = ev.back();
  EXPECT_EQ(last["stop"], true);
  for (const char* k :
       {"stop_type", "stopping_word", "tokens_predicted", "tokens_evaluated", "tokens_cached", "timings"}) {
    EXPECT_TRUE(last.contains(k)) << k;
  }
  EXPECT_EQ(text, j["content"]);
  EXPECT_EQ(json(tokens), j["tokens"]);
  EXPECT_EQ(last["stop_type"], j["stop_type"]);
  // A stop string cuts the text and is reported.
  const std::string full = j["content"];
  ASSERT_GT(full.size(), 10u);
  const std::string word = full.substr(full.size() / 2, 2);
  json w = post(port(), "/completion",
                {{"prompt", "The capital of France"}, {"n_predict", 24}, {"temperature", 0}, {"stop", {word}}});
  EXPECT_EQ(w["content"], full.substr(0, full.find(word)));
  EXPECT_EQ(w["stop_type"], "word");
  EXPECT_EQ(w["stopping_word"], word);
}

TEST_F(ServerE2E, OpenAiRoutes) {
  json c = post(port(), "/v1/completions",
                {{"model", "m"}, {"prompt", "Once upon"}, {"max_tokens", 12}, {"temperature", 0}});
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_TRUE(c["choices"][0].contains("text"));
  EXPECT_TRUE(c["choices"][0]["finish_reason"] == "length" || c["choices"][0]["finish_reason"] == "stop");
  EXPECT_EQ(c["usage"]["total_tokens"],
            c["usage"]["prompt_tokens"].get<int>() + c["usage"]["completion_tokens"].get<int>());
  bool done = false;
  RawResponse r =
      raw_request(port(), "POST", "/v1/completions",
                  json{{"prompt", "Once upon"}, {"max_tokens", 12}, {"temperature", 0}, {"stream", true}}.dump());
  std::string text;
  for (const json& e : sse_events(r.body, &done)) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(done);
  EXPECT_EQ(text, c["choices"][0]["text"]);

  const json msgs =
      json::array({{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", "Hi"}}});
  json ch = post(port(), "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 12}, {"temperature", 0}});
  EXPECT_EQ(ch["object"], "chat.completion");
  EXPECT_EQ(ch["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(ch["choices"][0]["message"].contains("content"));
  EXPECT_GT(ch["usage"]["prompt_tokens"].get<int>(), 5);
  // deepseek-r1 opens <think>: with no </think> the whole output is reasoning.
  EXPECT_TRUE(ch["choices"][0]["message"].contains("reasoning_content")) << ch.dump();
  done = false;
  r = raw_request(port(), "POST", "/v1/chat/completions",
                  json{{"messages", msgs},
                       {"max_tokens", 12},
                       {"temperature", 0},
                       {"stream", true},
                       {"stream_options", {{"include_usage", true}}}}
                      .dump());
  std::vector<json> ev = sse_events(r.body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  std::string reasoning;
  for (const json& e : ev) {
    if (e["choices"].empty()) continue;  // the usage chunk
    if (e["choices"][0]["delta"].contains("reasoning_content"))
      reasoning += e["choices"][0]["delta"]["reasoning_content"];
  }
  EXPECT_EQ(reasoning, ch["choices"][0]["message"]["reasoning_content"]);
  EXPECT_EQ(ev.back()["choices"], json::array());  // the usage comes in a chunk of its own
  EXPECT_EQ(ev.back()["usage"]["completion_tokens"], ch["usage"]["completion_tokens"]);
  json models = json::parse(raw_request(port(), "GET", "/v1/models", "").body);
  EXPECT_EQ(models["data"][0]["id"], "tiny-llama-Q4_K_M.gguf");
}

TEST_F(ServerE2E, SixteenConcurrentStreamsEachGetTheirAloneText) {
  std::vector<json> reqs;
  for (int i = 0; i < 16; ++i) {
    reqs.push_back({{"prompt", "Request " + std::to_string(i) + std::string(i * 5, '!') + " says"},
                    {"n_predict", 20 + i},
                    {"temperature", 0},
                    {"stream", true}});
  }
  std::vector<std::string> alone;
  for (const json& r : reqs) alone.push_back(stream_text(port(), r));
  std::vector<std::string> together(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) threads.emplace_back([&, i] { together[i] = stream_text(port(), reqs[i]); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 16; ++i) {
    EXPECT_FALSE(alone[i].empty());
    EXPECT_EQ(together[i], alone[i]) << "client " << i;
  }
  expect_idle_kv(port());
}

TEST_F(ServerE2E, ClientHangingUpMidStreamIsCancelled) {
  const double disconnects = metric(port(), "ds_client_disconnects_total");
  const json req = {{"prompt", "Tell me a long story"}, {"n_predict", 400}, {"ignore_eos", true}, {"stream", true}};
  EXPECT_GE(stream_then_hang_up(port(), "/completion", req.dump(), 3), 3);
  expect_idle_kv(port());
  for (int i = 0; i < 100 && metric(port(), "ds_client_disconnects_total") < disconnects + 1; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(metric(port(), "ds_client_disconnects_total"), disconnects + 1);
  // Non-streaming: the client leaves while the generation runs.
  const json req2 = {{"prompt", "Tell me a long story"}, {"n_predict", 400}, {"ignore_eos", true}};
  EXPECT_EQ(stream_then_hang_up(port(), "/completion", req2.dump(), 0), 0);
  expect_idle_kv(port());
  for (int i = 0; i < 100 && metric(port(), "ds_client_disconnects_total") < disconnects + 2; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(metric(port(), "ds_client_disconnects_total"), disconnects + 2);
  EXPECT_EQ(post(port(), "/completion", {{"prompt", "still there?"}, {"n_predict", 4}})["stop"], true);
}

TEST_F(ServerE2E, BadRequestsGetClearErrorsAndServerKeepsServing) {
  expect_error(raw_request(port(), "POST", "/completion", "{\"prompt\": \"unterminated"), 400, "invalid JSON",
               "invalid_request_error");
  expect_error(raw_request(port(), "POST", "/completion", R"({"prompt": 42})"), 400, "\"prompt\"");
  expect_error(raw_request(port(), "POST", "/completion", R"({"prompt":"a","temperature":"warm"})"), 400,
               "\"temperature\"");
  expect_error(raw_request(port(), "POST", "/completion", R"({"prompt":"a","n_predict":-7})"), 400, "\"n_predict\"");
  expect_error(raw_request(port(), "POST", "/completion", R"({"prompt":"a","n_predict":99999999999999})"), 400,
               "\"n_predict\"");
  expect_error(raw_request(port(), "POST", "/completion", "{\"prompt\":\"caf\xC3\x28 \xFF\"}"), 400, "invalid JSON");
  expect_error(raw_request(port(), "POST", "/completion", R"({"prompt":"a","stop":"x","logit_bias":"no"})"), 400,
               "\"logit_bias\"");
  expect_error(raw_request(port(), "POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":7}]})"),
               400, "messages[0].content");
  expect_error(raw_request(port(), "GET", "/no/such/route", ""), 404, "/no/such/route");
  // Unknown fields are ignored, as llama.cpp does: clients send many.
  json ok = post(port(), "/completion", {{"prompt", "a"}, {"n_predict", 3}, {"frobnicate", true}, {"user", "x"}});
  EXPECT_EQ(ok["stop"], true);
  // A huge n_predict that is a valid integer runs until the context is full.
  json big = post(port(), "/completion", {{"prompt", "a"}, {"n_predict", 2147483647}, {"ignore_eos", true}});
  EXPECT_EQ(big["stop_type"], "limit");
  EXPECT_EQ(big["tokens_predicted"].get<int>() + big["tokens_evaluated"].get<int>(), 512);
  expect_idle_kv(port());
}

TEST_F(ServerE2E, PromptOverTheContext) {
  std::string prompt;
  for (int i = 0; i < 300; ++i) prompt += " word" + std::to_string(i);
  RawResponse r = raw_request(port(), "POST", "/completion", json{{"prompt", prompt}}.dump());
  expect_error(r, 400, "context", "exceed_context_size_error");
  expect_error(raw_request(port(), "POST", "/v1/completions", json{{"prompt", prompt}}.dump()), 400, "context",
               "exceed_context_size_error");
  EXPECT_EQ(post(port(), "/completion", {{"prompt", "short"}, {"n_predict", 2}})["stop"], true);
}

TEST_F(ServerE2E, RepeatedPromptUsesThePrefixCache) {
  std::string prompt = "A shared system prompt that many requests repeat.";
  for (int i = 0; i < 40; ++i) prompt += " Rule " + std::to_string(i) + ": be exact.";
  const json req = {{"prompt", prompt}, {"n_predict", 8}, {"temperature", 0}};
  json a = post(port(), "/completion", req);
  json b = post(port(), "/completion", req);
  ASSERT_GT(a["tokens_evaluated"].get<int>(), 200);
  EXPECT_GT(b["tokens_cached"].get<int>(), 0);
  EXPECT_GE(b["tokens_cached"].get<int>(), a["tokens_evaluated"].get<int>() - 16);
  // Reuse shows in the token counts; prompt_ms is wall-clock and on a loaded machine a short
  // evaluation can take longer than a long one, so it is not compared here.
  EXPECT_LT(b["timings"]["prompt_n"].get<int>(), 17);
  EXPECT_EQ(b["timings"]["prompt_n"].get<int>() + b["tokens_cached"].get<int>(), a["tokens_evaluated"].get<int>());
  EXPECT_EQ(b["content"], a["content"]);
}

// n = 3 on the real engine: the choices run concurrently after the prompt was computed once;
// each equals the n = 1 request with seed + i (alone), and streamed per index equals the
// non-streamed choice.
TEST_F(ServerE2E, NChoicesRunTogetherAndMatchSeedPlusIndex) {
  std::string prompt = "Choices share this prompt.";
  for (int i = 0; i < 12; ++i) prompt += " Line " + std::to_string(i) + ".";
  const json req = {{"prompt", prompt}, {"max_tokens", 10}, {"temperature", 1}, {"seed", 21}, {"n", 3}};
  json all = post(port(), "/v1/completions", req);
  ASSERT_EQ(all["choices"].size(), 3u) << all;
  for (int i = 0; i < 3; ++i) {
    json one =
        post(port(), "/v1/completions", {{"prompt", prompt}, {"max_tokens", 10}, {"temperature", 1}, {"seed", 21 + i}});
    EXPECT_EQ(all["choices"][static_cast<size_t>(i)]["text"], one["choices"][0]["text"]) << i;
    EXPECT_GT(one["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  }
  json sreq = req;
  sreq["stream"] = true;
  bool done = false;
  RawResponse r = raw_request(port(), "POST", "/v1/completions", sreq.dump());
  std::map<int, std::string> text;
  for (const json& e : sse_events(r.body, &done)) {
    for (const json& c : e["choices"]) text[c["index"].get<int>()] += c["text"].get<std::string>();
  }
  EXPECT_TRUE(done);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(text[i], all["choices"][static_cast<size_t>(i)]["text"]) << i;
}

TEST_F(ServerE2E, TokenizeDetokenizePropsSlotsMetrics) {
  json t = post(port(), "/tokenize", {{"content", "Hello world"}});
  ASSERT_FALSE(t["tokens"].empty());
  EXPECT_EQ(post(port(), "/detokenize", {{"tokens", t["tokens"]}})["content"], "Hello world");
  json p = json::parse(raw_request(port(), "GET", "/props", "").body);
  EXPECT_EQ(p["total_slots"], 4);
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 512);
  EXPECT_EQ(json::parse(raw_request(port(), "GET", "/slots", "").body).size(), 4u);
  RawResponse m = raw_request(port(), "GET", "/metrics", "");
  EXPECT_EQ(m.status, 200);
  for (const char* k : {"ds_requests_total", "ds_generated_tokens_total", "ds_prompt_tokens_total",
                        "ds_requests_waiting", "ds_kv_blocks_used", "ds_prompt_tokens_per_second",
                        "ds_decode_tokens_per_second", "ds_time_to_first_token_seconds_bucket{le=\"+Inf\"}"}) {
    EXPECT_NE(m.body.find(k), std::string::npos) << k;
  }
}

// ---- one server per case ----

class GreedyMatchesCli : public ::testing::TestWithParam<const char*> {};

TEST_P(GreedyMatchesCli, SameText) {
  const std::string model = model_path(GetParam());
  const std::string prompt = "def fibonacci(n):";
  const std::string cmd =
      binary_dir() + "/src/ds-cli generate --model " + model + " --prompt '" + prompt + "' -n 32 --temp 0 2>/dev/null";
  auto gen = run_command(cmd);
  ASSERT_EQ(gen.exit_code, 0) << cmd;
  std::string cli = std::move(gen.out);
  ASSERT_FALSE(cli.empty());
  cli.pop_back();  // generate ends with a newline
  ServerProcess s;
  ASSERT_TRUE(s.start({"--model", model, "--parallel", "2", "--threads", "2"}));
  json j = post(s.port(), "/completion", {{"prompt", prompt}, {"n_predict", 32}, {"temperature", 0}});
  EXPECT_EQ(j["content"], cli);
  EXPECT_EQ(stream_text(s.port(), {{"prompt", prompt}, {"n_predict", 32}, {"temperature", 0}, {"stream", true}}), cli);
  EXPECT_EQ(s.stop(), 0) << s.log();
}

INSTANTIATE_TEST_SUITE_P(Refdata, GreedyMatchesCli,
                         ::testing::Values("tiny-llama-Q4_K_M.gguf", "tiny-qwen2-Q5_K_S.gguf", "tiny-dsv2-Q4_K_M.gguf",
                                           "tiny-dsv2-legacy-Q4_K_M.gguf", "tiny-dsv3-Q4_K_M.gguf",
                                           "tiny-ds1-Q4_K_M.gguf", "tiny-qwen3-Q4_K_M.gguf"));

TEST(ServerE2EAlone, FullQueueGets503WithRetryAfter) {
  ServerProcess s;
  ASSERT_TRUE(s.start(
      {"--model", model_path("tiny-qwen2-Q5_K_S.gguf"), "--parallel", "1", "--max-queue", "1", "--threads", "2"}));
  std::vector<RawResponse> out(6);
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      out[i] =
          raw_request(s.port(), "POST", "/completion",
                      json{{"prompt", "queue " + std::to_string(i)}, {"n_predict", 300}, {"ignore_eos", true}}.dump());
    });
    std::this_thread::sleep_for(20ms);
  }
  for (auto& t : threads) t.join();
  int n_503 = 0, n_200 = 0;
  for (const RawResponse& r : out) {
    if (r.status == 503) {
      ++n_503;
      expect_error(r, 503, "queue", "unavailable_error");
      EXPECT_NE(r.headers.find("Retry-After:"), std::string::npos);
    } else {
      EXPECT_EQ(r.status, 200) << r.body;
      ++n_200;
    }
  }
  EXPECT_GE(n_503, 1);
  EXPECT_GE(n_200, 2);
  EXPECT_EQ(post(s.port(), "/completion", {{"prompt", "after the rush"}, {"n_predict", 3}})["stop"], true);
  expect_idle_kv(s.port());
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(ServerE2EAlone, ApiKeyAndSigtermDuringAStream) {
  ServerProcess s;
  ASSERT_TRUE(s.start({"--model", model_path("tiny-dsv2-Q4_K_M.gguf"), "--api-key", "k3y", "--threads", "2", "--grace",
                       "1", "--log-format", "json", "--max-body-kb", "16"}));
  expect_error(raw_request(s.port(), "POST", "/completion", json{{"prompt", std::string(40000, 'a')}}.dump()), 413,
               "too large");
  expect_error(raw_request(s.port(), "POST", "/completion", R"({"prompt":"a"})"), 401, "API Key",
               "authentication_error");
  expect_error(raw_request(s.port(), "GET", "/metrics", "", {"Authorization: Bearer nope"}), 401, "API Key");
  EXPECT_EQ(raw_request(s.port(), "GET", "/health", "").status, 200);
  EXPECT_EQ(
      raw_request(s.port(), "POST", "/completion", R"({"prompt":"a","n_predict":2})", {"Authorization: Bearer k3y"})
          .status,
      200);
  EXPECT_EQ(raw_request(s.port(), "POST", "/completion", R"({"prompt":"a","n_predict":2})", {"X-Api-Key: k3y"}).status,
            200);
  // SIGTERM while a long stream runs: it is cancelled after the grace period, exit 0.
  RawResponse long_stream;
  std::thread t([&] {
    long_stream =
        raw_request(s.port(), "POST", "/completion",
                    R"({"prompt":"a","n_predict":100000,"ignore_eos":true,"stream":true})", {"X-Api-Key: k3y"});
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(s.stop(), 0) << s.log();
  t.join();
  EXPECT_EQ(long_stream.status, 200);
  const std::string log = s.log();
  EXPECT_NE(log.find("{\"time\":"), std::string::npos) << log;
  EXPECT_NE(log.find("SIGTERM"), std::string::npos);
}

// A llama-server command line runs unchanged: -c is the total context over -np sequences,
// GPU flags get a notice, the chat template comes from a file, server-wide sampling
// defaults apply, and CORS preflights and the model list need no key.
TEST(ServerE2EAlone, LlamaServerCommandLine) {
  ServerProcess s;
  const std::string tmpl = shared_path("chat/templates/deepseek-ai-DeepSeek-V3.1.jinja");
  ASSERT_TRUE(s.start({"-m",
                       model_path("tiny-llama-Q4_K_M.gguf"),
                       "-c",
                       "1024",
                       "-np",
                       "2",
                       "-t",
                       "2",
                       "-b",
                       "64",
                       "-ngl",
                       "99",
                       "-fa",
                       "on",
                       "--jinja",
                       "--chat-template-file",
                       tmpl,
                       "--temp",
                       "0",
                       "-n",
                       "5",
                       "--api-key",
                       "k3y",
                       "--metrics",
                       "--cont-batching",
                       "--no-webui"}));
  EXPECT_NE(s.log().find("--n-gpu-layers only applies to GPUs"), std::string::npos) << s.log();
  const std::vector<std::string> key = {"Authorization: Bearer k3y"};
  RawResponse p = raw_request(s.port(), "GET", "/props", "", key);
  ASSERT_EQ(p.status, 200) << p.body;
  const json props = json::parse(p.body);
  EXPECT_EQ(props["n_ctx"], 512);  // 1024 over 2 sequences
  EXPECT_EQ(props["total_slots"], 2);
  EXPECT_EQ(props["chat_template"], "deepseek-v3.1");
  EXPECT_EQ(props["model_path"], model_path("tiny-llama-Q4_K_M.gguf"));
  EXPECT_EQ(props["default_generation_settings"]["params"]["n_predict"], 5);
  EXPECT_EQ(raw_request(s.port(), "GET", "/v1/models", "").status, 200);
  RawResponse pre = raw_request(s.port(), "OPTIONS", "/v1/chat/completions", "",
                                {"Origin: https://app.example", "Access-Control-Request-Method: POST"});
  EXPECT_EQ(pre.status, 204) << pre.headers;
  EXPECT_NE(pre.headers.find("Access-Control-Allow-Origin: https://app.example"), std::string::npos) << pre.headers;
  RawResponse c = raw_request(s.port(), "POST", "/completion", R"({"prompt":"Once upon a time"})", key);
  ASSERT_EQ(c.status, 200) << c.body;
  const json j = json::parse(c.body);
  EXPECT_LE(j["tokens_predicted"].get<int>(), 5);
  EXPECT_EQ(j["generation_settings"]["temperature"], 0.0);
  EXPECT_NE(c.headers.find("Access-Control-Allow-Origin: *"), std::string::npos) << c.headers;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

// Locked pages of a running process (VmLck of /proc/PID/status), in bytes; -1 if unreadable.
int64_t locked_bytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmLck:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// --mlock under a limit that allows it: the server comes up with the weights locked.
TEST(ServerE2EAlone, MlockLocksTheWeights) {
  const std::string model = model_path("tiny-llama-Q4_K_M.gguf");
  struct rlimit rl {};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
  rl.rlim_cur = rl.rlim_max;  // the child inherits the raised soft limit
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
  std::ifstream f(model, std::ios::binary | std::ios::ate);
  const auto file_bytes = static_cast<int64_t>(f.tellg());
  if (rl.rlim_cur != RLIM_INFINITY && static_cast<int64_t>(rl.rlim_cur) < 2 * file_bytes && geteuid() != 0) {
    GTEST_SKIP() << "RLIMIT_MEMLOCK hard limit " << rl.rlim_max << " is below the model's size";
  }
  ServerProcess s;
  ASSERT_TRUE(s.start({"--model", model, "--mlock", "--parallel", "1", "--threads", "2"}));
  const int64_t locked = locked_bytes(s.pid());
  // Every weight byte the forward pass reads, and not the file's pages that repacking released.
  EXPECT_GT(locked, file_bytes / 2) << s.log();
  EXPECT_LT(locked, file_bytes + (int64_t{16} << 20)) << s.log();
  json c = post(s.port(), "/completion", {{"prompt", "Once upon a time"}, {"n_predict", 4}});
  EXPECT_EQ(c["tokens_predicted"], 4);
  EXPECT_EQ(s.stop(), 0) << s.log();
}

// --mlock under a locked-memory limit that is too small (and without CAP_IPC_LOCK, which
// would bypass it): exit 1 with an error that names the limit and the bytes needed.
TEST(ServerE2EAlone, MlockOverTheLimitExitsWithAClearError) {
  const std::string bin = binary_dir() + "/src/ds-server";
  const std::string log = make_temp_dir("ds_server_mlock") + "/server.log";
  std::vector<std::string> args = {
      bin,       "--host",    "127.0.0.1", "--port", "0", "--model", model_path("tiny-llama-Q4_K_M.gguf"),
      "--mlock", "--threads", "2"};
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    struct rlimit rl = {64 << 10, 64 << 10};
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) _exit(126);
    (void)prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0);  // root: exec then runs without it
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  close(fd);
  int status = 0;
  for (int i = 0; i < 600 && waitpid(pid, &status, WNOHANG) == 0; ++i) std::this_thread::sleep_for(100ms);
  if (waitpid(pid, &status, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "ds-server still ran 60 s after start-up with an mlock it cannot do";
  }
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 1) << text;
  EXPECT_NE(text.find("--mlock: cannot lock the model weights ("), std::string::npos) << text;
  EXPECT_NE(text.find("bytes in all"), std::string::npos) << text;
  EXPECT_NE(text.find("RLIMIT_MEMLOCK is 65536 bytes"), std::string::npos) << text;
}

}  // namespace
}  // namespace ds::test
