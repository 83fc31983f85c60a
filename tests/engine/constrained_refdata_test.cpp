// Constrained generation on the refdata models (random weights: the model never "wants"
// JSON, so every bit of structure comes from the constraint). Through the EngineLoop with
// the real engine and tokenizer: seeded requests over 24 schemas (nested objects, arrays,
// enums, unions, bounded numbers, patterns, formats, $ref) and forced tool calls in the four
// call formats. Every output that ends with EOS ("stop") must parse and validate against its
// schema (tests/constrain/json_validate.h, independent of src/constrain); every other output
// must end by the token limit ("length"), never by EOS while invalid.
#include <gtest/gtest.h>

#include <chrono>

#include "../constrain/json_validate.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "constrain/tool_call_grammar.h"
#include "ds/engine.h"
#include "serve/engine_loop.h"
#include "ds/tokenizer.h"
#include "refdata.h"

namespace ds::test {
namespace {

constexpr int kMaxTokens = 48;          // small: a bounded runtime on a loaded 2-core machine
constexpr int kRequestsPerModel = 250;  // x 4 models + tool calls: over 1,000 requests
constexpr int kToolCallsPerFormat = 8;
constexpr int kMaxToolTokens = 112;  // the call markers take many byte tokens in this vocabulary

const std::vector<std::string>& schemas() {
  static const std::vector<std::string> s = {
      R"({"type":"integer"})",
      R"({"type":"boolean"})",
      R"({"enum":["red","green","blue",1,null]})",
      R"({"type":"integer","minimum":-20,"maximum":300})",
      R"({"type":"number","minimum":0,"maximum":1})",
      R"({"type":"number","exclusiveMinimum":-5,"exclusiveMaximum":5})",
      R"({"type":["integer","null"]})",
      R"({"type":"string","maxLength":6})",
      R"({"type":"string","minLength":2,"maxLength":4})",
      R"({"type":"string","pattern":"^[A-Z]{2}-[0-9]{3}$"})",
      R"({"type":"string","pattern":"^(yes|no|maybe)!?$"})",
      R"({"type":"string","format":"date"})",
      R"({"type":"string","format":"uuid"})",
      R"({"type":"string","format":"time"})",
      R"({"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"maxItems":4})",
      R"({"type":"array","items":{"enum":["a","b"]},"minItems":1,"maxItems":3})",
      R"({"type":"array","prefixItems":[{"type":"boolean"},{"const":"x"}]})",
      R"({"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false})",
      R"({"type":"object","properties":{"id":{"type":"integer","minimum":1,"maximum":99},"tag":{"type":"string","maxLength":3}},"required":["id"]})",
      R"({"type":"object","properties":{"p":{"type":"object","properties":{"x":{"type":"integer","maximum":9,"minimum":0},"y":{"enum":[true,false]}},"required":["x","y"]}},"required":["p"]})",
      R"({"anyOf":[{"type":"integer","minimum":0,"maximum":5},{"type":"string","maxLength":2},{"type":"null"}]})",
      R"({"oneOf":[{"type":"boolean"},{"type":"array","items":{"type":"null"},"maxItems":2}]})",
      R"({"$defs":{"leaf":{"type":"integer","minimum":0,"maximum":3}},"type":"array","items":{"$ref":"#/$defs/leaf"},"maxItems":3})",
      R"({"type":"object","properties":{"kind":{"const":"pt"},"v":{"type":"array","items":{"type":"number","minimum":-1,"maximum":1},"maxItems":2}},"required":["kind","v"],"additionalProperties":false})",
  };
  return s;
}

const ojson kToolParams = ojson::parse(R"({"type":"object","properties":{
  "city":{"type":"string","maxLength":5},
  "days":{"type":"integer","minimum":1,"maximum":7},
  "unit":{"enum":["c","f"]}},"required":["city","days"]})");

struct Output {
  std::string text;
  StopReason reason = StopReason::kNone;
};

class ConstrainedRefdata : public ::testing::Test {
 protected:
  void open(const std::string& model) {
    loop_.reset();
    EngineOptions o;
    o.model_path = ref_path(model, ".gguf");
    o.n_ctx = 128;  // 16 prompt tokens + at most kMaxToolTokens
    o.n_parallel = 8;
    o.n_threads = 2;
    o.kv_type = "f32";
    o.max_batch_tokens = 256;
    auto e = Engine::create(o);
    ASSERT_TRUE(e.is_ok()) << e.message();
    engine_ = std::move(*e);
    const Tokenizer& tok = engine_->tokenizer();
    vocab_ = constrain::TokenVocab::build(
        tok.n_vocab(), [&](int32_t id) { return tok.is_special(id) ? std::string() : tok.token_bytes(id); },
        [&](int32_t id) { return tok.is_eog(id); });
    LoopOptions lo;
    lo.sched = {.n_slots = 8, .batch_tokens = 256, .max_queue = 4096, .n_ctx = 128};
    lo.is_eog = [&tok](int32_t t) { return tok.is_eog(t); };
    loop_ = std::make_unique<EngineLoop>(*engine_, lo);
    loop_->start();
    prompt_ = ref_tokens(model);
    prompt_.resize(16);
  }
  std::shared_ptr<const constrain::Constraint> compile(const std::string& gbnf) {
    auto g = constrain::parse_gbnf(gbnf);
    EXPECT_TRUE(g.is_ok()) << g.message();
    return std::make_shared<constrain::Constraint>(std::move(g).value(), vocab_);
  }
  // Runs the requests (constraint, seed) together, in order.
  std::vector<Output> run(const std::vector<std::pair<std::shared_ptr<const constrain::Constraint>, uint64_t>>& reqs,
                          int max_tokens = kMaxTokens) {
    std::vector<std::shared_ptr<GenStream>> streams;
    for (const auto& [c, seed] : reqs) {
      GenParams p;
      p.prompt = prompt_;
      p.n_predict = max_tokens;
      p.sampling.temperature = 1.0f;
      p.sampling.seed = seed;
      p.sampling.constraint = c;
      auto out = loop_->submit(std::move(p));
      EXPECT_EQ(out.code, SubmitCode::kOk);
      streams.push_back(out.stream);
    }
    std::vector<Output> runs(reqs.size());
    const Tokenizer& tok = engine_->tokenizer();
    for (size_t i = 0; i < streams.size(); ++i) {
      if (!streams[i]) continue;
      GenEvent ev;
      while (streams[i]->next(&ev, std::chrono::seconds(60))) {
        if (ev.done) {
          runs[i].reason = ev.reason;
          break;
        }
        runs[i].text += tok.is_special(ev.token) ? std::string() : tok.token_bytes(ev.token);
      }
    }
    return runs;
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<EngineLoop> loop_;
  std::shared_ptr<const constrain::TokenVocab> vocab_;
  std::vector<int32_t> prompt_;
};

TEST_F(ConstrainedRefdata, SchemasOnEveryModelValidateOrEndByLength) {
  int n_total = 0, n_stop = 0;
  for (const char* model : {"tiny-llama-Q4_K_M", "tiny-qwen2-Q5_K_S", "tiny-dsv2-Q4_K_M", "tiny-dsv3-Q4_K_M"}) {
    open(model);
    ASSERT_TRUE(loop_);
    std::vector<std::shared_ptr<const constrain::Constraint>> cs;
    for (const auto& s : schemas()) {
      auto g = constrain::json_schema_to_gbnf(ojson::parse(s));
      ASSERT_TRUE(g.is_ok()) << s << ": " << g.message();
      cs.push_back(compile(g.value()));
    }
    std::vector<std::pair<std::shared_ptr<const constrain::Constraint>, uint64_t>> reqs;
    for (int i = 0; i < kRequestsPerModel; ++i)
      reqs.push_back({cs[static_cast<size_t>(i) % cs.size()], 1000 + static_cast<uint64_t>(i)});
    const auto runs = run(reqs);
    for (int i = 0; i < kRequestsPerModel; ++i) {
      const std::string& schema = schemas()[static_cast<size_t>(i) % cs.size()];
      const Output& r = runs[static_cast<size_t>(i)];
      ++n_total;
      if (r.reason == StopReason::kEos) {
        ++n_stop;
        const ojson v = ojson::parse(r.text, nullptr, false);
        ASSERT_FALSE(v.is_discarded()) << model << " " << schema << ": invalid JSON ended by EOS: " << r.text;
        EXPECT_EQ(validate(ojson::parse(schema), v), "") << model << " " << schema << ": " << r.text;
      } else {
        EXPECT_EQ(r.reason, StopReason::kLimit) << model << " " << schema << ": " << r.text;
      }
    }
  }
  std::printf("constrained requests: %d, ended by EOS and valid: %d\n", n_total, n_stop);
  EXPECT_GE(n_total, 1000);
  EXPECT_GE(n_stop, n_total / 3);  // most schemas are short enough to finish within kMaxTokens
}

TEST_F(ConstrainedRefdata, ForcedToolCallsInEveryFormatValidate) {
  open("tiny-llama-Q4_K_M");
  ASSERT_TRUE(loop_);
  int n_calls = 0;
  for (ToolCallFormat f : {ToolCallFormat::kR1, ToolCallFormat::kV3_1, ToolCallFormat::kV3_2, ToolCallFormat::kV4}) {
    for (bool named : {true, false}) {
      ToolCallConstraint c;
      c.format = f;
      c.tools = {{"get_weather", kToolParams}, {"noop", ojson::parse(R"({"type":"object","properties":{}})")}};
      if (named) c.tools.resize(1);
      c.prefix = tool_call_opener(f, named ? "get_weather" : "");
      auto g = constrain::tool_call_gbnf(c);
      ASSERT_TRUE(g.is_ok()) << g.message();
      auto constraint = compile(g.value());
      std::vector<std::pair<std::shared_ptr<const constrain::Constraint>, uint64_t>> reqs;
      for (int i = 0; i < kToolCallsPerFormat; ++i) reqs.push_back({constraint, 7000 + static_cast<uint64_t>(i)});
      for (const Output& r : run(reqs, kMaxToolTokens)) {
        const std::string text = c.prefix + r.text;
        if (r.reason != StopReason::kEos) {
          EXPECT_EQ(r.reason, StopReason::kLimit) << text;
          continue;
        }
        ++n_calls;
        const auto parsed = ToolCallParser::parse(text, f);
        ASSERT_EQ(parsed.error, "") << tool_call_format_name(f) << ": " << text;
        ASSERT_EQ(parsed.calls.size(), 1u) << text;
        const auto& call = parsed.calls[0];
        const ojson args = ojson::parse(call.arguments, nullptr, false);
        ASSERT_FALSE(args.is_discarded()) << text;
        if (call.name == "get_weather") {
          EXPECT_EQ(validate(kToolParams, args), "") << tool_call_format_name(f) << ": " << text;
        } else {
          EXPECT_FALSE(named) << text;
          EXPECT_EQ(call.name, "noop") << text;
        }
      }
    }
  }
  std::printf("forced tool calls completed and valid: %d of %d\n", n_calls, 8 * kToolCallsPerFormat);
  EXPECT_GE(n_calls, 8 * kToolCallsPerFormat / 3);
}

}  // namespace
}  // namespace ds::test
