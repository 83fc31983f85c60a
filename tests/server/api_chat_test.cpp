// The chat front end through the API layer, on the fake engine (scripted to write a given
// output) and the byte-level fake codec parsing tool calls in a DeepSeek syntax: tool_calls
// in non-streaming and streamed responses (OpenAI's delta shapes), tool_choice and
// parallel_tool_calls, the thinking switches reaching the template, /apply-template, and the
// 400s that name the bad field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fake_codec.h"
#include "fake_engine.h"
#include "server/api.h"

namespace ds::test {
namespace {

using json = nlohmann::json;

// V3.1 syntax, written out here rather than taken from the code under test.
const std::string kV31Calls =
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"杭州\", \"unit\": "
    "\"celsius\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>search_docs<｜tool▁sep｜>{\"query\": \"KV "
    "cache\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
const std::string kV4Calls =
    "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" "
    "string=\"true\">Hang \"zhou\"</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" "
    "string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                                    "unit": {"type": "string"}},
                   "required": ["city"]}}},
  {"type": "function", "function": {"name": "search_docs",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}
])");

json user(const std::string& text) {
  return json::array({{{"role", "user"}, {"content", text}}});
}

class ApiChat : public ::testing::Test {
 protected:
  void TearDown() override { stop(); }
  void start(std::string script, bool reasoning = false, ToolCallFormat tools = ToolCallFormat::kV3_1) {
    stop();
    FakeEngineOptions eo;
    eo.script = std::move(script);
    eo.n_ctx = 2048;  // room for the tools in the prompt and a whole tool-call turn
    engine_ = std::make_unique<FakeEngine>(eo);
    codec_ = std::make_unique<FakeCodec>(reasoning, tools);
    LoopOptions lo;
    lo.sched = {.n_slots = 2, .batch_tokens = 64, .max_queue = 8, .n_ctx = eo.n_ctx};
    lo.is_eog = [](int32_t t) { return t == kFakeEos; };
    loop_ = std::make_unique<EngineLoop>(*engine_, lo);
    loop_->start();
    ctx_ = std::make_unique<ServerContext>();
    ctx_->opts.model_alias = "fake-model";
    ctx_->opts.max_body_bytes = 1 << 16;
    ctx_->loop = loop_.get();
    ctx_->codec = codec_.get();
    ctx_->model = &engine_->info();
    ctx_->ready = true;
  }
  void stop() {
    ctx_.reset();
    loop_.reset();
  }
  HttpResponse call(const json& body, const std::string& path = "/v1/chat/completions") {
    HttpRequest r{.method = "POST", .path = path, .headers = {}, .body = body.dump(), .alive = [] { return true; }};
    return handle_request(*ctx_, r);
  }
  json post(const json& body, const std::string& path = "/v1/chat/completions") {
    HttpResponse r = call(body, path);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_FALSE(r.stream);
    return json::parse(r.body);
  }
  std::vector<json> stream(json body) {
    body["stream"] = true;
    HttpResponse r = call(body);
    EXPECT_EQ(r.status, 200) << r.body;
    std::string out;
    StreamSink sink{.write = [&](std::string_view s) { return out.append(s), true; }, .alive = [] { return true; }};
    if (r.stream) r.stream(sink);
    std::vector<json> events;
    size_t pos = 0;
    for (size_t end; (end = out.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
      const std::string ev = out.substr(pos + 6, end - pos - 6);
      if (ev != "[DONE]") events.push_back(json::parse(ev));
    }
    EXPECT_NE(out.find("data: [DONE]"), std::string::npos) << out;
    return events;
  }
  void expect_400(const json& body, const std::string& needle, const std::string& path = "/v1/chat/completions") {
    HttpResponse r = call(body, path);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find(needle), std::string::npos) << "want '" << needle << "' in " << r.body;
  }

  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<FakeCodec> codec_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<ServerContext> ctx_;
};

TEST_F(ApiChat, ToolCallsNonStreaming) {
  start("Checking.\n" + kV31Calls);
  json j = post({{"messages", user("weather?")}, {"tools", kTools}});
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& msg = choice["message"];
  EXPECT_EQ(msg["content"], "Checking.");
  ASSERT_EQ(msg["tool_calls"].size(), 2u) << msg;
  for (const json& c : msg["tool_calls"]) {
    EXPECT_EQ(c["id"].get<std::string>().rfind("call_", 0), 0u);
    EXPECT_EQ(c["type"], "function");
    EXPECT_TRUE(c["function"]["arguments"].is_string());
  }
  EXPECT_NE(msg["tool_calls"][0]["id"], msg["tool_calls"][1]["id"]);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "杭州"}, {"unit", "celsius"}}));
  EXPECT_EQ(msg["tool_calls"][1]["function"]["name"], "search_docs");
  EXPECT_EQ(json::parse(msg["tool_calls"][1]["function"]["arguments"].get<std::string>()),
            json({{"query", "KV cache"}}));
  // parallel_tool_calls = false keeps the first call only.
  j = post({{"messages", user("weather?")}, {"tools", kTools}, {"parallel_tool_calls", false}});
  ASSERT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  // Without tools the output is not parsed: the markup is plain content.
  j = post({{"messages", user("weather?")}});
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Checking.\n" + kV31Calls);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST_F(ApiChat, ReasoningThenDsmlCallWithNullContent) {
  start("Plan: call weather.</think>" + kV4Calls, /*reasoning=*/true, ToolCallFormat::kV4);
  json j = post({{"messages", user("weather?")}, {"tools", kTools}});
  const json& msg = j["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "Plan: call weather.");
  EXPECT_TRUE(msg["content"].is_null()) << msg;
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Hang \"zhou\""}, {"days", 3}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
}

TEST_F(ApiChat, StreamedToolCallsAsOpenAiDeltas) {
  start("Checking.\n" + kV31Calls);
  const json body = {{"messages", user("weather?")}, {"tools", kTools}};
  const json whole = post(body)["choices"][0]["message"];
  std::vector<json> events = stream(body);
  ASSERT_FALSE(events.empty());
  std::string content;
  std::vector<std::string> ids, names, args;
  bool call_seen = false;
  for (const json& e : events) {
    const json& d = e["choices"][0]["delta"];
    if (d.contains("content") && d["content"].is_string()) {
      EXPECT_FALSE(call_seen) << "content after a call started";
      content += d["content"].get<std::string>();
    }
    if (!d.contains("tool_calls")) continue;
    call_seen = true;
    for (const json& c : d["tool_calls"]) {
      const size_t i = c["index"].get<size_t>();
      if (c.contains("id")) {  // the call's first delta: index, id, type, name, empty arguments
        ASSERT_EQ(i, ids.size());
        ids.push_back(c["id"]);
        EXPECT_EQ(c["type"], "function");
        names.push_back(c["function"]["name"]);
        EXPECT_EQ(c["function"]["arguments"], "");
        args.emplace_back();
      } else {
        ASSERT_LT(i, args.size());
        EXPECT_FALSE(c["function"].contains("name"));
        args[i] += c["function"]["arguments"].get<std::string>();
      }
    }
  }
  EXPECT_EQ(content, whole["content"]);
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0], "get_weather");
  EXPECT_EQ(names[1], "search_docs");
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(args[i], whole["tool_calls"][i]["function"]["arguments"]);
    EXPECT_EQ(ids[i].rfind("call_", 0), 0u);
  }
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "tool_calls");
}

TEST_F(ApiChat, ForcedCallsArePrefilledAndValidated) {
  // The prompt ends with the V3.1 opener through the name; the script is the whole turn, so
  // the fake model continues after the prefill with the arguments.
  const std::string named = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>";
  start(named + "{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  const json choice = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  json j = post({{"messages", user("hi")}, {"tools", kTools}, {"tool_choice", choice}});
  const json& msg = j["choices"][0]["message"];
  ASSERT_EQ(msg["tool_calls"].size(), 1u) << j;
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  // The prompt is the rendered chat plus the opener ("<s>" is one token, the rest bytes).
  const std::string rendered =
      post({{"messages", user("hi")}, {"tools", kTools}, {"tool_choice", choice}}, "/apply-template")["prompt"];
  EXPECT_EQ(j["usage"]["prompt_tokens"].get<size_t>(), 1 + rendered.size() - 3 + named.size());
  // The same forced call streamed: the name arrives in the first call delta.
  std::vector<json> events = stream({{"messages", user("hi")}, {"tools", kTools}, {"tool_choice", choice}});
  std::string name, args;
  for (const json& e : events) {
    for (const json& c : e["choices"][0]["delta"].value("tool_calls", json::array())) {
      if (c.contains("id")) name = c["function"]["name"];
      args += c["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json::parse(args), json({{"city", "Paris"}}));
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "tool_calls");

  // required: the opener stops before the name; the model picks the function.
  start("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search_docs<｜tool▁sep｜>{\"query\": \"x\"}<｜tool▁call▁end｜>");
  j = post({{"messages", user("hi")}, {"tools", kTools}, {"tool_choice", "required"}});
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "search_docs");

  // A model that would break the schema is held to it by the call's grammar: "town" is not
  // a property, so the output takes the only key the schema allows.
  start(named + "{\"town\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  j = post({{"messages", user("hi")}, {"tools", kTools}, {"tool_choice", choice}, {"max_tokens", 200}});
  ASSERT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u) << j;
  const json args2 =
      json::parse(j["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args2.contains("city")) << args2;
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  // A schema outside the constrained subset: the call is generated unconstrained and checked
  // afterwards, so the model's bad arguments are an error naming what failed.
  json exotic = kTools;
  exotic[0]["function"]["parameters"]["allOf"] = json::array();
  HttpResponse bad = call({{"messages", user("hi")}, {"tools", exotic}, {"tool_choice", choice}});
  EXPECT_EQ(bad.status, 500) << bad.body;
  EXPECT_NE(bad.body.find("arguments.city is required"), std::string::npos) << bad.body;
  // Cut off by max_tokens: finish_reason "length" with the text so far, not an error.
  j = post({{"messages", user("hi")}, {"tools", kTools}, {"tool_choice", choice}, {"max_tokens", 5}});
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(j["choices"][0]["message"]["content"].get<std::string>().rfind(named + "{", 0), 0u);
}

// tool_choice auto: free text is the model's own; once it opens a call, the call's grammar
// holds it to the tool's schema ("town" is not a property, "city" is required).
TEST_F(ApiChat, AutoCallsAreHeldToTheirSchemaOnceOpened) {
  const std::string opener = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>";
  start("Let me look.\n" + opener + "{\"town\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  const json body = {{"messages", user("hi")}, {"tools", kTools}, {"max_tokens", 200}};
  json j = post(body);
  const json& msg = j["choices"][0]["message"];
  EXPECT_EQ(msg["content"], "Let me look.") << j;
  ASSERT_EQ(msg["tool_calls"].size(), 1u) << j;
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  const json args = json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args.contains("city")) << args;
  EXPECT_FALSE(args.contains("town")) << args;
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  std::string streamed;
  for (const json& e : stream(body)) {
    for (const json& c : e["choices"][0]["delta"].value("tool_calls", json::array())) {
      streamed += c["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(json::parse(streamed), args);
  // Unconstrained, the same model's call would name "town". A model that writes no call ends
  // as it likes, with EOS: "stop".
  start("No call needed.");
  j = post(body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "No call needed.");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // DSML (V4): the trigger <｜DSML｜tool_calls> starts the call; the templates' raw
  // string="true" values pass the call grammar; a parameter the schema lacks is not written.
  const json long_body = {{"messages", user("hi")}, {"tools", kTools}, {"max_tokens", 600}};  // a token per byte
  std::string v4 = kV4Calls;
  v4.replace(v4.find("\"city\""), 6, "\"town\"");
  start("ok" + v4, false, ToolCallFormat::kV4);
  j = post(long_body);
  ASSERT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u) << j;
  const json a4 = json::parse(j["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(a4.contains("city")) << a4;
  EXPECT_FALSE(a4.contains("town")) << a4;
  start("ok" + kV4Calls, false, ToolCallFormat::kV4);
  j = post(long_body);
  EXPECT_EQ(json::parse(j["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Hang \"zhou\""}, {"days", 3}}))
      << j;
}

TEST_F(ApiChat, ToolChoiceNoneHidesToolsAndSwitchesReachTheTemplate) {
  start("ok");
  json p = post({{"messages", user("hi")}, {"tools", kTools}}, "/apply-template");
  EXPECT_NE(p["prompt"].get<std::string>().find("<|tools|>"), std::string::npos);
  p = post({{"messages", user("hi")}, {"tools", kTools}, {"tool_choice", "none"}}, "/apply-template");
  EXPECT_EQ(p["prompt"], "<s><|user|>hi<|assistant|>");
  // DeepSeek's thinking switch and top-level reasoning_effort; chat_template_kwargs win.
  p = post({{"messages", user("hi")}, {"thinking", {{"type", "enabled"}}}, {"reasoning_effort", "max"}},
           "/apply-template");
  EXPECT_EQ(p["prompt"], "<s><|thinking:on|><|enable_thinking:on|><|effort:max|><|user|>hi<|assistant|>");
  p = post({{"messages", user("hi")},
            {"thinking", {{"type", "enabled"}}},
            {"chat_template_kwargs", {{"thinking", false}, {"reasoning_effort", "high"}}},
            {"add_generation_prompt", false}},
           "/apply-template");
  EXPECT_EQ(p["prompt"], "<s><|thinking:off|><|enable_thinking:on|><|effort:high|><|user|>hi");
  p = post({{"messages", user("hi")}, {"chat_template_kwargs", {{"enable_thinking", true}}}}, "/apply-template");
  EXPECT_EQ(p["prompt"], "<s><|enable_thinking:on|><|user|>hi<|assistant|>");
  // A JSON response format is handed to the template (V4 writes it into the system prompt).
  p = post({{"messages", user("hi")}, {"response_format", {{"type", "json_object"}}}}, "/apply-template");
  EXPECT_EQ(p["prompt"], "<s><|format|>{\"type\": \"json_object\"}<|user|>hi<|assistant|>");
}

TEST_F(ApiChat, ToolRoundTripMessagesAreAccepted) {
  start("It is 21C.");
  const json msgs = json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "reasoning_content": "need it",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "21C"}
  ])");
  json p = post({{"messages", msgs}, {"tools", kTools}}, "/apply-template");
  // The arguments text arrives at the template as a JSON object.
  EXPECT_NE(p["prompt"].get<std::string>().find("<|assistant|>need it<|call|>get_weather {\"city\": \"Paris\"}"
                                                "<|tool|>21C<|assistant|>"),
            std::string::npos)
      << p["prompt"];
  json j = post({{"messages", msgs}, {"tools", kTools}});
  EXPECT_EQ(j["choices"][0]["message"]["content"], "It is 21C.");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST_F(ApiChat, BadToolsAndMessagesNameTheField) {
  start("ok");
  const json u = user("hi");
  auto tool = [](json fn, std::string type = "function") { return json::array({{{"type", type}, {"function", fn}}}); };
  expect_400({{"messages", u}, {"tools", tool({{"name", "f"}}, "retrieval")}}, "tools[0].type");
  expect_400({{"messages", u}, {"tools", tool({{"description", "no name"}})}}, "tools[0].function.name");
  expect_400({{"messages", u}, {"tools", tool({{"name", "f"}, {"parameters", "string"}})}},
             "tools[0].function.parameters");
  expect_400({{"messages", u}, {"tools", tool({{"name", "f"}, {"parameters", {{"type", "array"}}}})}},
             "tools[0].function.parameters");
  expect_400({{"messages", u}, {"tools", "f"}}, "\\\"tools\\\"");
  const json orphan = json::parse(R"([{"role": "user", "content": "a"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_9", "content": "r"}])");
  expect_400({{"messages", orphan}}, "messages[2].tool_call_id");
  expect_400({{"messages", json::parse(R"([{"role": "tool", "content": "r"}])")}}, "messages[0].tool_call_id");
  expect_400({{"messages", json::parse(R"([{"role": "assistant", "tool_calls": [{"type": "function",
      "function": {"arguments": "{}"}}]}])")}},
             "messages[0].tool_calls[0].function.name");
  expect_400({{"messages", json::parse(R"([{"role": "robot", "content": "x"}])")}}, "messages[0].role");
  expect_400(
      {{"messages", u}, {"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
      "tool_choice.function.name");
  expect_400({{"messages", u}, {"tool_choice", "required"}}, "tool_choice");
  expect_400({{"messages", u}, {"tools", kTools}, {"tool_choice", "sometimes"}}, "tool_choice");
  expect_400({{"messages", u}, {"thinking", {{"type", "maybe"}}}}, "\\\"thinking\\\"");
  expect_400({{"messages", u}, {"chat_template_kwargs", {{"thinking", "yes"}}}}, "chat_template_kwargs.thinking");
  expect_400({{"messages", u}, {"reasoning_effort", "extreme"}}, "reasoning_effort");
  expect_400({{"messages", u}, {"parallel_tool_calls", "no"}}, "parallel_tool_calls");
  // A chat format without tool-call syntax refuses tools rather than ignoring them.
  start("ok", false, ToolCallFormat::kNone);
  expect_400({{"messages", u}, {"tools", kTools}}, "no tool-call syntax");
  expect_400({{"messages", u}, {"tools", kTools}}, "no tool-call syntax", "/apply-template");
}

}  // namespace
}  // namespace ds::test
