// Output constraints through the API (fake engine, byte-level codec): response_format
// json_object / json_schema on the OpenAI routes, json_schema and grammar on /completion,
// streamed and not; outputs checked with the validator in tests/constrain/json_validate.h;
// 400s that name the field, keyword or grammar position; "length", never "stop", when the
// constraint cannot finish within max_tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "../constrain/json_validate.h"
#include "fake_codec.h"
#include "fake_engine.h"
#include "server/api.h"

namespace ds::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class ApiConstrain : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeEngineOptions eo;
    eo.n_ctx = 2048;
    eo.n_blocks = 1024;
    engine_ = std::make_unique<FakeEngine>(eo);
    codec_ = std::make_unique<FakeCodec>();
    LoopOptions lo;
    lo.sched = {.n_slots = 4, .batch_tokens = 64, .max_queue = 16, .n_ctx = eo.n_ctx};
    lo.is_eog = [](int32_t t) { return t == kFakeEos; };
    loop_ = std::make_unique<EngineLoop>(*engine_, lo);
    loop_->start();
    ctx_ = std::make_unique<ServerContext>();
    ctx_->opts.model_alias = "fake-model";
    ctx_->opts.n_ctx = eo.n_ctx;
    ctx_->loop = loop_.get();
    ctx_->codec = codec_.get();
    ctx_->model = &engine_->info();
    ctx_->ready = true;
  }
  HttpResponse call(const std::string& path, const json& body) {
    HttpRequest r{.method = "POST", .path = path, .headers = {}, .body = body.dump(), .alive = [] { return true; }};
    return handle_request(*ctx_, r);
  }
  json post(const std::string& path, const json& body) {
    HttpResponse r = call(path, body);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }
  std::string stream_text(const std::string& path, const json& body, std::string* finish) {
    HttpResponse r = call(path, body);
    EXPECT_EQ(r.status, 200) << r.body;
    std::string raw;
    StreamSink sink{.write =
                        [&](std::string_view s) {
                          raw.append(s);
                          return true;
                        },
                    .alive = [] { return true; }};
    if (r.stream) r.stream(sink);
    std::string text;
    size_t pos = 0;
    while ((pos = raw.find("data: ", pos)) != std::string::npos) {
      const size_t end = raw.find("\n\n", pos);
      const std::string ev = raw.substr(pos + 6, end - pos - 6);
      pos = end;
      if (ev == "[DONE]") break;
      json j = json::parse(ev);
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const json& c = j["choices"][0];
      if (c.contains("delta") && c["delta"].contains("content") && c["delta"]["content"].is_string())
        text += c["delta"]["content"];
      if (c.contains("finish_reason") && c["finish_reason"].is_string()) *finish = c["finish_reason"];
    }
    return text;
  }
  // The JSON events of a streamed response (not [DONE]); the raw stream in *raw.
  std::vector<json> events(const std::string& path, const json& body, std::string* raw = nullptr) {
    HttpResponse r = call(path, body);
    EXPECT_EQ(r.status, 200) << r.body;
    std::string out;
    StreamSink sink{.write = [&](std::string_view s) { return out.append(s), true; }, .alive = [] { return true; }};
    if (r.stream) r.stream(sink);
    std::vector<json> evs;
    size_t pos = 0;
    for (size_t end; (end = out.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
      const std::string ev = out.substr(pos + 6, end - pos - 6);
      if (ev != "[DONE]") evs.push_back(json::parse(ev));
    }
    if (raw) *raw = out;
    return evs;
  }
  void expect_error(const HttpResponse& r, const std::string& needle) {
    EXPECT_EQ(r.status, 400) << r.body;
    json j = json::parse(r.body);
    EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  }
  // A finished output validates; an unfinished one is reported as "length".
  void expect_valid(const ojson& schema, const std::string& text, const std::string& finish) {
    const ojson v = ojson::parse(text, nullptr, false);
    if (finish == "stop") {
      ASSERT_FALSE(v.is_discarded()) << "invalid JSON with finish_reason stop: " << text;
      EXPECT_EQ(validate(schema, v), "") << text;
    } else {
      EXPECT_EQ(finish, "length") << text;
    }
  }

  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<FakeCodec> codec_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<ServerContext> ctx_;
};

const ojson kSchema = ojson::parse(R"({
  "type": "object",
  "properties": {
    "color": {"enum": ["red", "green", "blue"]},
    "n": {"type": "integer", "minimum": -5, "maximum": 99},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 2},
    "ok": {"type": ["boolean", "null"]}
  },
  "required": ["color", "n", "tags", "ok"],
  "additionalProperties": false
})");

TEST_F(ApiConstrain, ChatJsonSchemaValidates) {
  int n_stop = 0;
  for (int seed = 0; seed < 12; ++seed) {
    json body = {{"messages", {{{"role", "user"}, {"content", "give json"}}}},
                 {"max_tokens", 400},
                 {"seed", seed},
                 {"response_format",
                  {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"strict", true}, {"schema", kSchema}}}}}};
    json j = post("/v1/chat/completions", body);
    const std::string finish = j["choices"][0]["finish_reason"];
    n_stop += finish == "stop";
    expect_valid(kSchema, j["choices"][0]["message"]["content"], finish);
  }
  EXPECT_GT(n_stop, 6);  // small strings and arrays: most outputs finish within 120 tokens
}

TEST_F(ApiConstrain, ChatJsonSchemaStreamed) {
  for (int seed = 0; seed < 4; ++seed) {
    std::string finish;
    json body = {{"messages", {{{"role", "user"}, {"content", "give json"}}}},
                 {"max_tokens", 120},
                 {"seed", seed},
                 {"stream", true},
                 {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", kSchema}}}}}};
    const std::string text = stream_text("/v1/chat/completions", body, &finish);
    expect_valid(kSchema, text, finish);
  }
}

TEST_F(ApiConstrain, JsonObjectIsAnObject) {
  for (int seed = 0; seed < 6; ++seed) {
    json j = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                                           {"max_tokens", 60},
                                           {"seed", seed},
                                           {"response_format", {{"type", "json_object"}}}});
    const std::string text = j["choices"][0]["message"]["content"];
    if (j["choices"][0]["finish_reason"] == "stop") {
      const ojson v = ojson::parse(text, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << text;
      EXPECT_TRUE(v.is_object()) << text;
    } else {
      EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    }
  }
}

TEST_F(ApiConstrain, CompletionGrammarAndJsonSchema) {
  for (int seed = 0; seed < 6; ++seed) {
    json j = post("/completion", {{"prompt", "answer:"},
                                  {"n_predict", 20},
                                  {"seed", seed},
                                  {"grammar", "root ::= (\"yes\" | \"no\") \" \" [0-9]{2}"}});
    const std::string c = j["content"];
    EXPECT_TRUE(c.size() == 6 || c.size() == 5) << c;
    EXPECT_TRUE(c.rfind("yes ", 0) == 0 || c.rfind("no ", 0) == 0) << c;
    EXPECT_EQ(j["stop_type"], "eos");
  }
  const ojson schema = {{"type", "array"},
                        {"items", {{"type", "integer"}, {"minimum", 0}, {"maximum", 9}}},
                        {"minItems", 2},
                        {"maxItems", 3}};
  json j = post("/completion", {{"prompt", "list:"}, {"n_predict", 40}, {"seed", 3}, {"json_schema", schema}});
  EXPECT_EQ(j["stop_type"], "eos");
  expect_valid(schema, j["content"], "stop");
  json o =
      post("/v1/completions", {{"prompt", "list:"},
                               {"max_tokens", 40},
                               {"seed", 3},
                               {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}}}});
  expect_valid(schema, o["choices"][0]["text"], o["choices"][0]["finish_reason"]);
}

TEST_F(ApiConstrain, CannotFinishIsLengthNotStop) {
  const ojson schema = {{"const", "a fairly long constant string"}};
  json j = post("/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                 {"max_tokens", 5},
                 {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}}}});
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "\"a fa");
}

TEST_F(ApiConstrain, ErrorsNameFieldKeywordAndPosition) {
  json chat = {{"messages", {{{"role", "user"}, {"content", "x"}}}}};
  json b = chat;
  b["response_format"] = {{"type", "yaml"}};
  expect_error(call("/v1/chat/completions", b), "response_format.type");
  b["response_format"] = {{"type", "json_schema"}};
  expect_error(call("/v1/chat/completions", b), "response_format.json_schema");
  b["response_format"] = {{"type", "json_schema"},
                          {"json_schema", {{"schema", {{"type", "string"}, {"contentEncoding", "base64"}}}}}};
  expect_error(call("/v1/chat/completions", b), "unsupported keyword 'contentEncoding'");
  expect_error(call("/completion", {{"prompt", "x"}, {"grammar", "root ::= \"a\"\nb ::= [x"}}),
               "grammar: line 2, column 7: unterminated character class");
  expect_error(call("/completion", {{"prompt", "x"}, {"grammar", "root ::= undefined-rule"}}),
               "undefined rule 'undefined-rule'");
  expect_error(
      call("/completion", {{"prompt", "x"}, {"json_schema", {{"type", "integer"}, {"minimum", 5}, {"maximum", 1}}}}),
      "json_schema");
  expect_error(
      call("/completion", {{"prompt", "x"}, {"grammar", "root ::= \"a\""}, {"json_schema", {{"type", "string"}}}}),
      "only one of");
}

// An array of prompts: one result per prompt, in order, each equal to the prompt's own run.
TEST_F(ApiConstrain, PromptArraysGiveOneResultPerPrompt) {
  const json prompts = {"hello", json::array({'a', 'b', 'c'}), "third one"};
  json a = post("/completion", {{"prompt", prompts}, {"n_predict", 12}, {"temperature", 0}});
  ASSERT_TRUE(a.is_array()) << a;
  ASSERT_EQ(a.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    json one = post("/completion", {{"prompt", prompts[i]}, {"n_predict", 12}, {"temperature", 0}});
    EXPECT_EQ(a[i]["content"], one["content"]) << i;
    EXPECT_EQ(a[i]["index"], i);
    EXPECT_EQ(a[i]["tokens_evaluated"], one["tokens_evaluated"]) << i;
  }
  json o = post("/v1/completions", {{"prompt", prompts}, {"max_tokens", 12}, {"temperature", 0}});
  ASSERT_EQ(o["choices"].size(), 3u) << o;
  int64_t n_prompt = 0;
  for (size_t i = 0; i < 3; ++i) {
    json one = post("/v1/completions", {{"prompt", prompts[i]}, {"max_tokens", 12}, {"temperature", 0}});
    EXPECT_EQ(o["choices"][i]["text"], one["choices"][0]["text"]) << i;
    EXPECT_EQ(o["choices"][i]["index"], i);
    n_prompt += one["usage"]["prompt_tokens"].get<int64_t>();
  }
  EXPECT_EQ(o["usage"]["prompt_tokens"], n_prompt);
  // Streamed: each prompt's events carry its index and add up to its result; llama.cpp's
  // route ends each prompt with its final object, OpenAI's with a finish_reason per index.
  std::map<int, std::string> text;
  std::set<int> ended;
  for (const json& e :
       events("/completion", {{"prompt", prompts}, {"n_predict", 12}, {"temperature", 0}, {"stream", true}})) {
    const int i = e["index"];
    text[i] += e["content"].get<std::string>();
    if (e["stop"] == true) ended.insert(i);
  }
  ASSERT_EQ(ended.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(text[i], a[static_cast<size_t>(i)]["content"]) << i;
  text.clear();
  ended.clear();
  for (const json& e :
       events("/v1/completions", {{"prompt", prompts}, {"max_tokens", 12}, {"temperature", 0}, {"stream", true}})) {
    for (const json& c : e["choices"]) {
      text[c["index"].get<int>()] += c["text"].get<std::string>();
      if (c["finish_reason"].is_string()) ended.insert(c["index"].get<int>());
    }
  }
  ASSERT_EQ(ended.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(text[i], o["choices"][static_cast<size_t>(i)]["text"]) << i;
  // A mixed array of ids and strings stays one prompt; a streamed array holds at most 16.
  json mixed = post("/completion", {{"prompt", json::array({"ab", 99, "cd"})}, {"n_predict", 4}});
  EXPECT_TRUE(mixed.is_object());
  expect_error(call("/completion", {{"prompt", std::vector<std::string>(17, "p")}, {"stream", true}}), "at most 16");
  // An error in one prompt is the batch's error.
  expect_error(call("/v1/completions", {{"prompt", json::array({"ok", json::array({-5})})}}), "prompt");
}

// n choices: each equals the single request with seed + i; the prompt is computed once and
// then taken from the prefix cache.
TEST_F(ApiConstrain, NChoicesUseSeedPlusIndex) {
  const json msgs = {{{"role", "user"}, {"content", "pick"}}};
  json j = post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 10}, {"seed", 40}, {"n", 3}});
  ASSERT_EQ(j["choices"].size(), 3u) << j;
  int64_t completion = 0;
  for (int i = 0; i < 3; ++i) {
    json one = post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 10}, {"seed", 40 + i}});
    EXPECT_EQ(j["choices"][i]["message"]["content"], one["choices"][0]["message"]["content"]) << i;
    EXPECT_EQ(j["choices"][i]["index"], i);
    completion += one["usage"]["completion_tokens"].get<int64_t>();
  }
  EXPECT_EQ(j["usage"]["completion_tokens"], completion);
  json c = post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 6}, {"seed", 5}, {"n", 2}});
  ASSERT_EQ(c["choices"].size(), 2u) << c;
  json c1 = post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 6}, {"seed", 6}});
  EXPECT_EQ(c["choices"][1]["text"], c1["choices"][0]["text"]);
  EXPECT_GT(loop_->stats().tokens_cached, 0);
  expect_error(call("/v1/chat/completions", {{"messages", msgs}, {"n", 17}}), "\"n\"");
}

// n choices streamed: the choices' chunks interleave, each with its index; per index they add
// up to the non-streamed choice with the same seed; one [DONE]; include_usage sums the choices.
TEST_F(ApiConstrain, NChoicesStreamedEqualNonStreamed) {
  const json msgs = {{{"role", "user"}, {"content", "pick"}}};
  const json body = {{"messages", msgs}, {"max_tokens", 10}, {"seed", 40}, {"n", 3}};
  json whole = post("/v1/chat/completions", body);
  json sb = body;
  sb["stream"] = true;
  sb["stream_options"] = {{"include_usage", true}};
  std::string raw;
  std::vector<json> evs = events("/v1/chat/completions", sb, &raw);
  std::map<int, std::string> text;
  std::map<int, std::string> finish;
  std::set<std::string> ids;
  json usage;
  for (const json& e : evs) {
    ids.insert(e["id"].get<std::string>());
    if (e.contains("usage") && e["choices"].empty()) usage = e["usage"];
    for (const json& c : e["choices"]) {
      if (c["delta"].contains("content")) text[c["index"].get<int>()] += c["delta"]["content"].get<std::string>();
      if (c["finish_reason"].is_string()) finish[c["index"].get<int>()] = c["finish_reason"];
    }
  }
  EXPECT_EQ(ids.size(), 1u) << raw;  // one completion id, as OpenAI streams n choices
  ASSERT_EQ(finish.size(), 3u) << raw;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(text[i], whole["choices"][static_cast<size_t>(i)]["message"]["content"]) << i;
    EXPECT_EQ(finish[i], whole["choices"][static_cast<size_t>(i)]["finish_reason"]) << i;
  }
  EXPECT_EQ(usage["completion_tokens"], whole["usage"]["completion_tokens"]) << raw;
  EXPECT_EQ(usage["prompt_tokens"], whole["usage"]["prompt_tokens"]) << raw;
  size_t n_done = 0;
  for (size_t p = 0; (p = raw.find("data: [DONE]", p)) != std::string::npos; ++p) ++n_done;
  EXPECT_EQ(n_done, 1u);
  EXPECT_EQ(raw.rfind("data: [DONE]\n\n"), raw.size() - 14);
  // Completions: n = 2 streamed.
  std::map<int, std::string> ctext;
  for (const json& e :
       events("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 6}, {"seed", 5}, {"n", 2}, {"stream", true}})) {
    for (const json& c : e["choices"]) ctext[c["index"].get<int>()] += c["text"].get<std::string>();
  }
  json c = post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 6}, {"seed", 5}, {"n", 2}});
  EXPECT_EQ(ctext[0], c["choices"][0]["text"]);
  EXPECT_EQ(ctext[1], c["choices"][1]["text"]);
}

// logprobs: the model's distribution after the constraint (a two-token grammar leaves two
// candidates whose probabilities sum to 1), before temperature (greedy picks the top entry).
TEST_F(ApiConstrain, ChatLogprobs) {
  const json msgs = {{{"role", "user"}, {"content", "x"}}};
  json j = post("/v1/chat/completions", {{"messages", msgs},
                                         {"max_tokens", 1},
                                         {"logprobs", true},
                                         {"top_logprobs", 5},
                                         {"grammar", "root ::= \"a\" | \"b\""}});
  const json& c = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(c.size(), 1u) << j;
  ASSERT_EQ(c[0]["top_logprobs"].size(), 2u) << j;
  double mass = 0;
  for (const json& t : c[0]["top_logprobs"]) mass += std::exp(t["logprob"].get<double>());
  EXPECT_NEAR(mass, 1.0, 1e-5);
  EXPECT_TRUE(c[0]["token"] == "a" || c[0]["token"] == "b");

  json g = post("/v1/chat/completions",
                {{"messages", msgs}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 3}});
  const json& e = g["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(e.size(), g["usage"]["completion_tokens"].get<size_t>()) << g;
  std::string text;
  for (const json& t : e) {
    ASSERT_EQ(t["top_logprobs"].size(), 3u);
    EXPECT_EQ(t["token"], t["top_logprobs"][0]["token"]);  // greedy: the most likely token
    EXPECT_FLOAT_EQ(t["logprob"].get<float>(), t["top_logprobs"][0]["logprob"].get<float>());
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(), t["top_logprobs"][1]["logprob"].get<double>());
    for (const json& b : t["bytes"]) text += static_cast<char>(b.get<int>());
  }
  EXPECT_EQ(text, g["choices"][0]["message"]["content"]);
  // The same tokens sampled at another temperature have the same log-probabilities.
  json hot = post("/v1/chat/completions",
                  {{"messages", msgs}, {"max_tokens", 12}, {"temperature", 0.3}, {"seed", 1}, {"logprobs", true}});
  const json& h = hot["choices"][0]["logprobs"]["content"];
  for (size_t i = 0; i < std::min(h.size(), e.size()) && h[i]["token"] == e[i]["token"]; ++i) {
    EXPECT_FLOAT_EQ(h[i]["logprob"].get<float>(), e[i]["logprob"].get<float>()) << i;
  }
  // Streamed: the chunks' entries add up to the tokens.
  HttpResponse r =
      call("/v1/chat/completions",
           {{"messages", msgs}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", true}, {"stream", true}});
  std::string raw;
  StreamSink sink{.write =
                      [&](std::string_view s) {
                        raw.append(s);
                        return true;
                      },
                  .alive = [] { return true; }};
  r.stream(sink);
  size_t n = 0, pos = 0;
  while ((pos = raw.find("data: {", pos)) != std::string::npos) {
    const size_t end = raw.find("\n\n", pos);
    json ev = json::parse(raw.substr(pos + 6, end - pos - 6));
    pos = end;
    if (ev["choices"].size() && ev["choices"][0]["logprobs"].is_object())
      n += ev["choices"][0]["logprobs"]["content"].size();
  }
  EXPECT_EQ(n, e.size());
  expect_error(call("/v1/chat/completions", {{"messages", msgs}, {"top_logprobs", 21}, {"logprobs", true}}),
               "top_logprobs");
}

TEST_F(ApiConstrain, CompletionLogprobs) {
  json j = post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 2}});
  const json& lp = j["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << j;
  ASSERT_EQ(lp["tokens"].size(), 8u);
  std::string text;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(lp["text_offset"][i], text.size());
    text += lp["tokens"][i].get<std::string>();
    EXPECT_EQ(lp["top_logprobs"][i].size(), std::min<size_t>(2, lp["top_logprobs"][i].size()));
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
  }
  EXPECT_EQ(text, j["choices"][0]["text"]);
  json none = post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 2}});
  EXPECT_TRUE(none["choices"][0]["logprobs"].is_null());
}

// Byte tokens 0xC8 and 0xC9 are not UTF-8 by themselves: both would read U+FFFD and collide
// as keys of top_logprobs; they come out as OpenAI writes them, "bytes:\xNN".
TEST_F(ApiConstrain, CompletionLogprobsKeysOfByteTokens) {
  json j = post("/v1/completions", {{"prompt", "abc"},
                                    {"max_tokens", 1},
                                    {"temperature", 0},
                                    {"logprobs", 2},
                                    {"logit_bias", {{"200", 300}, {"201", 290}}}});
  const json& lp = j["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << j;
  EXPECT_EQ(lp["tokens"][0], "bytes:\\xc8") << j;
  const json& top = lp["top_logprobs"][0];
  ASSERT_EQ(top.size(), 2u) << j;
  EXPECT_TRUE(top.contains("bytes:\\xc8")) << j;
  EXPECT_TRUE(top.contains("bytes:\\xc9")) << j;
  EXPECT_GT(top["bytes:\\xc8"].get<double>(), top["bytes:\\xc9"].get<double>());
  // UTF-8 tokens keep their text.
  json a =
      post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 1}, {"logprobs", 1}, {"logit_bias", {{"65", 60}}}});
  EXPECT_EQ(a["choices"][0]["logprobs"]["tokens"][0], "A") << a;
}

// /completion n_probs: llama.cpp's fields, the model's top_logprobs and the sampling chain's
// top_probs; under a two-token grammar the model's distribution has exactly two tokens.
TEST_F(ApiConstrain, CompletionNProbsFields) {
  json j =
      post("/completion", {{"prompt", "q"}, {"n_predict", 1}, {"n_probs", 4}, {"grammar", "root ::= \"x\" | \"y\""}});
  const json& p = j["completion_probabilities"][0];
  for (const char* k : {"id", "token", "bytes", "logprob", "prob", "top_logprobs", "top_probs"})
    EXPECT_TRUE(p.contains(k)) << k;
  ASSERT_EQ(p["top_logprobs"].size(), 2u) << j;
  double mass = 0;
  for (const json& t : p["top_logprobs"]) mass += std::exp(t["logprob"].get<double>());
  EXPECT_NEAR(mass, 1.0, 1e-5);
  EXPECT_EQ(p["bytes"].size(), 1u);
}

}  // namespace
}  // namespace ds::test
