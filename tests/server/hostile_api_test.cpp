// Hostile request bodies through the API layer (fake engine and byte-level codec, no
// sockets): deeply nested JSON in every field of every POST route, out-of-range numbers,
// huge values that must not be echoed back, prompts that must exceed the context (rejected
// before the tokenizer runs), the stop-string limit and the 401 challenge. Each case states
// its expected status; none may be a 5xx or take the process down.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "fake_codec.h"
#include "fake_engine.h"
#include "server/api.h"
#include "server/json_parse.h"

namespace ds::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Counts the bytes handed to the tokenizer, so a test can tell "rejected before tokenizing".
class CountingCodec final : public TextCodec {
 public:
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_bos, bool parse_special) const override {
    bytes_encoded += text.size();
    return inner_.encode(text, add_bos, parse_special);
  }
  std::string token_text(int32_t id) const override { return inner_.token_text(id); }
  std::string token_bytes(int32_t id) const override { return inner_.token_bytes(id); }
  bool is_eog(int32_t id) const override { return inner_.is_eog(id); }
  int32_t n_vocab() const override { return inner_.n_vocab(); }
  size_t max_bytes_per_token() const override { return inner_.max_bytes_per_token(); }
  Result<std::string> render_chat(const ChatInput& input) const override { return inner_.render_chat(input); }
  std::string chat_template_name() const override { return inner_.chat_template_name(); }
  ToolCallFormat tool_call_format() const override { return inner_.tool_call_format(); }
  std::unique_ptr<ReasoningFilter> reasoning_filter(std::string_view prompt) const override {
    return inner_.reasoning_filter(prompt);
  }

  mutable std::atomic<size_t> bytes_encoded{0};

 private:
  FakeCodec inner_;
};

constexpr int kNCtx = 512;
constexpr size_t kMaxErrorBody = 1024;  // an error response quotes at most a few dozen input bytes

// `depth` nested arrays around 1: [[[...1...]]].
std::string nested(size_t depth) {
  return std::string(depth, '[') + "1" + std::string(depth, ']');
}

class HostileApi : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeEngineOptions eo{.n_ctx = kNCtx};
    engine_ = std::make_unique<FakeEngine>(eo);
    LoopOptions lo;
    lo.sched = {.n_slots = 2, .batch_tokens = 64, .max_queue = 8, .n_ctx = kNCtx};
    lo.is_eog = [](int32_t t) { return t == kFakeEos; };
    loop_ = std::make_unique<EngineLoop>(*engine_, lo);
    loop_->start();
    ctx_.opts.model_alias = "fake-model";
    ctx_.opts.n_ctx = kNCtx;
    ctx_.opts.max_body_bytes = 16u << 20;
    ctx_.loop = loop_.get();
    ctx_.codec = &codec_;
    ctx_.model = &engine_->info();
    ctx_.ready = true;
  }
  HttpResponse post(const std::string& path, const std::string& body) {
    HttpRequest r{.method = "POST", .path = path, .headers = {}, .body = body, .alive = [] { return true; }};
    return handle_request(ctx_, r);
  }
  // Status, a short body, the message's needle, and no exception text from the JSON library.
  void expect_error(const HttpResponse& r, int status, const std::string& needle) {
    EXPECT_EQ(r.status, status) << r.body.substr(0, 300);
    EXPECT_LT(r.body.size(), kMaxErrorBody) << r.body.substr(0, 300);
    const json j = json::parse(r.body);
    const std::string msg = j["error"]["message"].get<std::string>();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
  }
  void TearDown() override {
    EXPECT_EQ(ctx_.counters.http_errors_5xx.load(), 0);
    for (int i = 0; i < 500 && loop_->stats().n_running + loop_->stats().n_waiting > 0; ++i) {
      std::this_thread::sleep_for(2ms);
    }
    EXPECT_EQ(loop_->stats().kv_blocks_used, 0);
  }

  std::unique_ptr<FakeEngine> engine_;
  CountingCodec codec_;
  std::unique_ptr<EngineLoop> loop_;
  ServerContext ctx_;
};

const char* const kPostRoutes[] = {"/completion",       "/completions", "/v1/completions", "/v1/chat/completions",
                                   "/chat/completions", "/tokenize",    "/detokenize"};

TEST_F(HostileApi, DeepNestingInAnyFieldIs400NamingTheField) {
  const std::string deep = nested(100000);  // ~200 KB; used to overflow the stack
  for (const char* route : kPostRoutes) {
    for (const char* field : {"prompt", "temperature", "messages", "stop", "logit_bias", "content", "tokens",
                              "stream_options", "some_unknown_field"}) {
      SCOPED_TRACE(std::string(route) + " " + field);
      expect_error(post(route, std::string("{\"") + field + "\":" + deep + "}"), 400,
                   std::string("\"") + field + "[0]");
    }
    expect_error(post(route, deep), 400, "nests deeper than 64 levels");
    std::string objects;
    for (int i = 0; i < 50000; ++i) objects += "{\"a\":";
    expect_error(post(route, objects), 400, "nests deeper than 64 levels");
  }
  // Long keys at every level: the path keeps its start and end, the message stays short.
  std::string long_keys;
  for (int i = 0; i < 100; ++i) long_keys += "{\"" + std::string(200, 'k') + "\":";
  expect_error(post("/completion", long_keys), 400, "nests deeper than 64 levels");
  // The path names nested fields too.
  expect_error(post("/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":" + nested(5000) + "}]}"),
               400, "\"messages[0].content[0]");
}

TEST_F(HostileApi, DepthLimitIsExactly64) {
  // The body object is level 1, so a field holds 63 levels at most.
  const std::string ok = R"({"prompt":"a","n_predict":1,"x":)" + nested(kMaxJsonDepth - 1) + "}";
  EXPECT_EQ(post("/completion", ok).status, 200);
  const std::string deep = R"({"prompt":"a","n_predict":1,"x":)" + nested(kMaxJsonDepth) + "}";
  expect_error(post("/completion", deep), 400, "nests deeper than 64 levels");
}

TEST_F(HostileApi, OutOfRangeNumbersAre400NamingTheField) {
  for (const char* field : {"temperature", "n_predict", "seed", "top_k", "top_p", "max_tokens", "n_probs"}) {
    for (const char* number : {"1e400", "-1e400", "123456789e999999999"}) {
      SCOPED_TRACE(std::string(field) + " = " + number);
      expect_error(post("/completion", std::string(R"({"prompt":"a",")") + field + "\":" + number + "}"), 400,
                   std::string("\"") + field + "\": the number");
    }
  }
  expect_error(
      post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"logit_bias":{"5":1e999}})"), 400,
      "\"logit_bias.5\": the number 1e999 is out of range");
  // Big but finite values are range errors of the field itself.
  expect_error(post("/completion", R"({"prompt":"a","temperature":1e300})"), 400, "\"temperature\" must be");
  expect_error(post("/completion", R"({"prompt":"a","seed":18446744073709551615})"), 400, "\"seed\" must be");
}

TEST_F(HostileApi, HugeValuesAreNotEchoed) {
  const std::string big(1 << 20, 'x');
  expect_error(post("/completion", json{{"prompt", "a"}, {"temperature", big}}.dump()), 400, "\"temperature\" must be");
  expect_error(post("/completion", json{{"prompt", "a"}, {"stop", json::array({1, big})}}.dump()), 400, "\"stop\"");
  expect_error(post("/completion", json{{"prompt", json{{"k", big}}}}.dump()), 400, "\"prompt\" must be");
  expect_error(post("/detokenize", json{{"tokens", json::array({big})}}.dump()), 400, "\"tokens\"");
  std::vector<int> many(200000, 1);
  expect_error(post("/completion", json{{"prompt", "a"}, {"logit_bias", many}}.dump()), 400, "\"logit_bias\"");
  // Syntax errors quote a few bytes near the error, never the whole token.
  expect_error(post("/completion", "{\"prompt\":\"" + big), 400, "invalid JSON");
  expect_error(post("/completion", "{\"prompt\":" + big + "}"), 400, "invalid JSON at byte 11");
  expect_error(post("/completion", "{\"prompt\": tru}"), 400, "invalid JSON at byte");
  expect_error(post("/completion", ""), 400, "invalid JSON");
}

TEST_F(HostileApi, PromptThatMustExceedTheContextIsRejectedBeforeTokenizing) {
  // The fake vocabulary's longest token is 3 bytes: kNCtx * 3 bytes are at least kNCtx tokens.
  const size_t limit = kNCtx * codec_.max_bytes_per_token();
  const std::string word(7u << 20, 'a');  // one 7 MiB word
  HttpResponse r = post("/completion", json{{"prompt", word}}.dump());
  expect_error(r, 400, "\"prompt\" has 7340032 bytes");
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "exceed_context_size_error");
  EXPECT_EQ(json::parse(r.body)["error"]["n_ctx"], kNCtx);
  expect_error(post("/completion", json{{"prompt", std::string(limit, 'a')}}.dump()), 400, "at least 512 tokens");
  expect_error(post("/completion", json{{"prompt", json::array({1, 2, std::string(limit - 3, 'a')})}}.dump()), 400,
               "at least 513 tokens");  // 2 ids + (limit - 3) / 3
  expect_error(post("/v1/completions", json{{"prompt", word}}.dump()), 400, "\"prompt\" has");
  expect_error(
      post("/v1/chat/completions", json{{"messages", json::array({{{"role", "user"}, {"content", word}}})}}.dump()),
      400, "\"messages\" has");
  expect_error(post("/tokenize", json{{"content", word}}.dump()), 400, "\"content\" has");
  EXPECT_EQ(codec_.bytes_encoded.load(), 0u);
  // One byte less may still fit: it is tokenized, then rejected by its token count.
  r = post("/completion", json{{"prompt", std::string(limit - 1, 'a')}}.dump());
  expect_error(r, 400, "the prompt has");
  EXPECT_EQ(codec_.bytes_encoded.load(), limit - 1);
}

TEST_F(HostileApi, StopStringsAtMost16) {
  json stop = json::array();
  for (int i = 0; i < 16; ++i) stop.push_back("zz" + std::to_string(i));
  EXPECT_EQ(post("/completion", json{{"prompt", "a"}, {"n_predict", 2}, {"stop", stop}}.dump()).status, 200);
  stop.push_back("one more");
  expect_error(post("/completion", json{{"prompt", "a"}, {"stop", stop}}.dump()), 400, "at most 16 strings");
}

TEST_F(HostileApi, UnauthorizedCarriesBearerChallenge) {
  ctx_.opts.api_key = "sekret";
  HttpRequest r{.method = "GET", .path = "/props", .headers = {}, .body = {}, .alive = [] { return true; }};
  HttpResponse resp = handle_request(ctx_, r);
  EXPECT_EQ(resp.status, 401);
  bool challenge = false;
  for (const auto& [k, v] : resp.headers) challenge = challenge || (k == "WWW-Authenticate" && v == "Bearer");
  EXPECT_TRUE(challenge) << resp.body;
}

}  // namespace
}  // namespace ds::test
