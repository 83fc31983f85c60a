// The constraint engine without a model: the GBNF parser (accepted languages, errors with
// positions), the JSON Schema compiler (instances accepted or rejected as the schema says,
// checked against the independent validator in json_validate.h; errors that name the
// keyword), the matcher, and token masks checked token by token against the matcher; the
// tool_choice auto grammar (free text, then a call constrained from the call block's opening
// marker on) in the four call formats.
#include <gtest/gtest.h>

#include <random>

#include "constrain/grammar.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "constrain/tool_call_grammar.h"
#include "json_validate.h"
#include "text/tool_call_parser.h"

namespace ds::test {
namespace {

using constrain::Constraint;
using constrain::Matcher;
using constrain::TokenVocab;

// A vocabulary of every single byte (ids 0-255), some multi-byte tokens, and an EOS (last).
std::shared_ptr<const TokenVocab> small_vocab() {
  static auto v = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
    for (const char* s : {"{\"", "\":", "\",", "\"}", "true", "false", "null", "12", "3.5", "  ",    "\n ", "abc",
                          "ab",  "-1",  "e+",  "é",   "\xC3", "\xA9x", "[{",   "}]", "\"a", "2024-", "00"}) {
      t.emplace_back(s);
    }
    t.emplace_back("");  // EOS
    const auto n = static_cast<int32_t>(t.size());
    return TokenVocab::build(
        n, [t](int32_t id) { return t[static_cast<size_t>(id)]; }, [n](int32_t id) { return id == n - 1; });
  }();
  return v;
}

std::shared_ptr<const Constraint> compile_gbnf(const std::string& g) {
  auto r = constrain::parse_gbnf(g);
  EXPECT_TRUE(r.is_ok()) << r.message() << "\n" << g;
  if (!r) return nullptr;
  return std::make_shared<Constraint>(std::move(r).value(), small_vocab());
}

std::shared_ptr<const Constraint> compile_schema(const ojson& schema) {
  auto g = constrain::json_schema_to_gbnf(schema);
  EXPECT_TRUE(g.is_ok()) << g.message();
  if (!g) return nullptr;
  return compile_gbnf(g.value());
}

bool full_match(const std::shared_ptr<const Constraint>& c, std::string_view text) {
  Matcher m(c);
  return m.accept_bytes(text) && m.can_end();
}

TEST(Gbnf, LiteralsClassesGroupsAndRepetitions) {
  auto c = compile_gbnf(R"(
    # a comment
    root ::= greeting " " name ("!" | "?")?
    greeting ::= "hi" | "hello"
    name ::= [A-Z] [a-z]{1,3} digits
    digits ::= [0-9]*
  )");
  ASSERT_TRUE(c);
  EXPECT_TRUE(full_match(c, "hi Bob"));
  EXPECT_TRUE(full_match(c, "hello Anna42!"));
  EXPECT_TRUE(full_match(c, "hi Al?"));
  EXPECT_FALSE(full_match(c, "hi A"));      // {1,3} needs one lowercase letter
  EXPECT_FALSE(full_match(c, "hi Abcde"));  // at most three
  EXPECT_FALSE(full_match(c, "hey Bob"));
  EXPECT_FALSE(full_match(c, "hi bob"));
  EXPECT_FALSE(full_match(c, "hi Bob!!"));
}

TEST(Gbnf, AlternativesOnNextLineAndEscapes) {
  auto c = compile_gbnf("root ::= \"a\\n\" \n  | [\\x41-\\x43]+ \"\\u00e9\"\n  | [^a-z\\\"]\n");
  ASSERT_TRUE(c);
  EXPECT_TRUE(full_match(c, "a\n"));
  EXPECT_TRUE(full_match(c, "ABCA\xC3\xA9"));
  EXPECT_TRUE(full_match(c, "Z"));
  EXPECT_TRUE(full_match(c, "\xE2\x82\xAC"));  // a negated class takes any multi-byte character
  EXPECT_FALSE(full_match(c, "q"));
  EXPECT_FALSE(full_match(c, "\""));
  EXPECT_FALSE(full_match(c, "\xE2\x82"));  // an unfinished character
}

TEST(Gbnf, ExactAndOpenCounts) {
  auto c = compile_gbnf(R"(root ::= "x"{2} "y"{2,} "z"{0,1})");
  ASSERT_TRUE(c);
  EXPECT_TRUE(full_match(c, "xxyy"));
  EXPECT_TRUE(full_match(c, "xxyyyyyz"));
  EXPECT_FALSE(full_match(c, "xyy"));
  EXPECT_FALSE(full_match(c, "xxy"));
  EXPECT_FALSE(full_match(c, "xxyyzz"));
}

TEST(Gbnf, ErrorsNamePositionAndRule) {
  auto e1 = constrain::parse_gbnf("root ::= \"a\"\nfoo ::= [a-z\n");
  ASSERT_FALSE(e1.is_ok());
  EXPECT_NE(e1.message().find("line 2"), std::string::npos) << e1.message();
  EXPECT_NE(e1.message().find("unterminated character class"), std::string::npos) << e1.message();

  auto e2 = constrain::parse_gbnf("root ::= a b\na ::= \"x\"");
  ASSERT_FALSE(e2.is_ok());
  EXPECT_NE(e2.message().find("undefined rule 'b'"), std::string::npos) << e2.message();
  EXPECT_NE(e2.message().find("line 1, column 12"), std::string::npos) << e2.message();

  auto e3 = constrain::parse_gbnf("start ::= \"x\"");
  ASSERT_FALSE(e3.is_ok());
  EXPECT_NE(e3.message().find("no 'root' rule"), std::string::npos);

  auto e4 = constrain::parse_gbnf("root ::= root \"x\" | \"y\"");
  ASSERT_FALSE(e4.is_ok());
  EXPECT_NE(e4.message().find("left-recursive"), std::string::npos) << e4.message();

  auto e5 = constrain::parse_gbnf("root ::= \"x\" @");
  ASSERT_FALSE(e5.is_ok());
  EXPECT_NE(e5.message().find("line 1, column 14: unexpected character '@'"), std::string::npos) << e5.message();

  auto e6 = constrain::parse_gbnf("root ::= (\"x\"");
  ASSERT_FALSE(e6.is_ok());
  EXPECT_NE(e6.message().find("expected ')'"), std::string::npos) << e6.message();
}

// Every instance: accepted by the grammar exactly when the validator accepts it.
struct SchemaCase {
  ojson schema;
  std::vector<std::string> instances;
};

TEST(JsonSchema, GrammarAgreesWithValidator) {
  const std::vector<SchemaCase> cases = {
      {{{"type", "object"},
        {"properties",
         {{"name", {{"type", "string"}}}, {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 150}}}}},
        {"required", {"name"}}},
       {R"({"name":"x"})", R"({"name": "Bo", "age": 42})", R"({"name":"x","age":151})", R"({"age":3})",
        R"({"name":"x","age":-1})", R"({"name":1})", R"({ "name" : "q" , "age" : 0 })"}},
      {{{"type", "array"}, {"items", {{"enum", {"red", "green", 3, nullptr}}}}, {"minItems", 1}, {"maxItems", 3}},
       {R"(["red"])", R"([])", R"(["red",3,null])", R"(["red",3,null,"green"])", R"(["blue"])"}},
      {{{"type", {"string", "null"}}, {"maxLength", 3}}, {R"("abc")", R"("abcd")", "null", "1", R"("é")"}},
      {{{"anyOf", {{{"type", "boolean"}}, {{"type", "number"}, {"exclusiveMinimum", -2.5}, {"maximum", 10}}}}},
       {"true", "-2", "-2.5", "-3", "10", "10.5", "9.999", "-1.25", "false"}},
      {{{"type", "string"}, {"pattern", "^[a-z]{2,3}-\\d+$"}},
       {R"("ab-1")", R"("abcd-1")", R"("ab-")", R"("xy-12345")"}},
      {{{"type", "string"}, {"format", "date"}}, {R"("2024-02-29")", R"("2024-13-01")", R"("24-01-01")"}},
      {{{"type", "string"}, {"format", "uuid"}},
       {R"("123e4567-e89b-12d3-a456-426614174000")", R"("123e4567-e89b-12d3-a456-42661417400")"}},
      {{{"$defs",
         {{"node",
           {{"type", "object"},
            {"properties",
             {{"v", {{"type", "integer"}}}, {"next", {{"anyOf", {{{"$ref", "#/$defs/node"}}, {{"type", "null"}}}}}}}},
            {"required", {"v", "next"}}}}}},
        {"$ref", "#/$defs/node"}},
       {R"({"v":1,"next":{"v":2,"next":null}})", R"({"v":1,"next":{"v":2}})", R"({"v":1,"next":null})"}},
      {{{"type", "array"}, {"prefixItems", {{{"type", "integer"}}, {{"const", "x"}}}}},
       {R"([1,"x"])", R"([1,"y"])", R"([1])"}},
      {{{"type", "object"}, {"additionalProperties", {{"type", "integer"}}}},
       {R"({"a":1,"b":2})", R"({"a":"1"})", "{}"}},
      {{{"type", "integer"}, {"minimum", -37}, {"maximum", 1234}}, {"-37", "-38", "1234", "1235", "0", "-0", "007"}},
  };
  for (const auto& sc : cases) {
    auto c = compile_schema(sc.schema);
    ASSERT_TRUE(c) << sc.schema.dump();
    for (const auto& text : sc.instances) {
      const ojson v = ojson::parse(text, nullptr, false);
      const bool valid = !v.is_discarded() && validate(sc.schema, v).empty();
      // The grammar may accept a subset of valid instances (json_schema.h), never an invalid one.
      if (full_match(c, text)) {
        EXPECT_TRUE(valid) << sc.schema.dump() << " accepted invalid " << text;
      }
    }
  }
  // And the instances the grammar must accept.
  auto c = compile_schema(cases[0].schema);
  EXPECT_TRUE(full_match(c, R"({"name": "Bo", "age": 42})"));
  EXPECT_FALSE(full_match(c, R"({"age":3})"));
  auto n = compile_schema(cases[3].schema);
  for (const char* ok : {"true", "-2", "10", "9.999", "-1.25", "0.5"}) EXPECT_TRUE(full_match(n, ok)) << ok;
  auto r = compile_schema(cases[7].schema);
  EXPECT_TRUE(full_match(r, R"({"v":1,"next":{"v":2,"next":null}})"));
  auto p = compile_schema(cases[4].schema);
  EXPECT_TRUE(full_match(p, R"("xy-12345")"));
}

TEST(JsonSchema, IntegerRangesExactly) {
  for (auto [lo, hi] :
       std::vector<std::pair<int, int>>{{-37, 1234}, {0, 9}, {5, 5}, {-1000, -10}, {99, 1001}, {-5, 0}}) {
    auto c = compile_schema({{"type", "integer"}, {"minimum", lo}, {"maximum", hi}});
    ASSERT_TRUE(c);
    for (int v = -2100; v <= 2100; ++v) {
      EXPECT_EQ(full_match(c, std::to_string(v)), v >= lo && v <= hi) << v << " in [" << lo << "," << hi << "]";
    }
  }
  auto open = compile_schema({{"type", "integer"}, {"minimum", 17}});
  EXPECT_TRUE(full_match(open, "17"));
  EXPECT_TRUE(full_match(open, "123456"));
  EXPECT_FALSE(full_match(open, "16"));
  EXPECT_FALSE(full_match(open, "-20"));
}

TEST(JsonSchema, UnsupportedKeywordsAndBadSchemasAreNamed) {
  auto e1 = constrain::json_schema_to_gbnf(
      {{"type", "object"}, {"properties", {{"a", {{"type", "string"}, {"contentMediaType", "x"}}}}}});
  ASSERT_FALSE(e1.is_ok());
  EXPECT_NE(e1.message().find("unsupported keyword 'contentMediaType'"), std::string::npos) << e1.message();
  EXPECT_NE(e1.message().find("/properties/a"), std::string::npos) << e1.message();
  auto e2 = constrain::json_schema_to_gbnf({{"allOf", ojson::array()}});
  ASSERT_FALSE(e2.is_ok());
  EXPECT_NE(e2.message().find("'allOf'"), std::string::npos);
  auto e3 = constrain::json_schema_to_gbnf({{"$ref", "#/$defs/missing"}});
  ASSERT_FALSE(e3.is_ok());
  EXPECT_NE(e3.message().find("is not defined"), std::string::npos);
  auto e4 = constrain::json_schema_to_gbnf({{"type", "string"}, {"format", "email"}});
  ASSERT_FALSE(e4.is_ok());
  EXPECT_NE(e4.message().find("format"), std::string::npos);
  auto e5 = constrain::json_schema_to_gbnf({{"type", "string"}, {"pattern", "a\\bc"}});
  ASSERT_FALSE(e5.is_ok());
  EXPECT_NE(e5.message().find("pattern"), std::string::npos);
}

TEST(Matcher, EosOnlyWhereTheGrammarMayEnd) {
  auto c = compile_gbnf(R"(root ::= "ab" "c"?)");
  const int32_t eos = small_vocab()->n_vocab - 1;
  Matcher m(c);
  auto allowed = [&](int32_t t) { return (m.mask()[static_cast<size_t>(t) / 64] >> (t % 64)) & 1; };
  EXPECT_FALSE(allowed(eos));
  EXPECT_TRUE(allowed('a'));
  EXPECT_TRUE(allowed(256 + 12));  // "ab"
  EXPECT_FALSE(allowed('b'));
  EXPECT_FALSE(m.accept_token(eos));
  EXPECT_TRUE(m.accept_token(256 + 12));
  EXPECT_TRUE(allowed(eos));
  EXPECT_TRUE(allowed('c'));
  EXPECT_FALSE(m.must_end());
  EXPECT_TRUE(m.accept_token('c'));
  EXPECT_TRUE(m.must_end());
  for (int32_t t = 0; t < eos; ++t) EXPECT_FALSE(allowed(t)) << t;
  EXPECT_TRUE(allowed(eos));
}

// Masks against the definition: token t is allowed iff a copy of the matcher accepts its
// bytes (EOS iff the grammar may end), along random valid walks through JSON grammars.
TEST(Matcher, MasksEqualTokenByTokenAcceptance) {
  const auto vocab = small_vocab();
  const int32_t eos = vocab->n_vocab - 1;
  const std::vector<std::shared_ptr<const Constraint>> cs = {
      compile_gbnf(constrain::json_object_gbnf()),
      compile_schema({{"type", "object"},
                      {"properties",
                       {{"d", {{"type", "string"}, {"format", "date"}}},
                        {"n", {{"type", "number"}, {"minimum", -3}, {"maximum", 3}}},
                        {"l", {{"type", "array"}, {"items", {{"type", "boolean"}}}, {"maxItems", 2}}}}},
                      {"required", {"d", "n", "l"}}})};
  std::mt19937 rng(7);
  for (const auto& c : cs) {
    ASSERT_TRUE(c);
    for (int walk = 0; walk < 20; ++walk) {
      Matcher m(c);
      for (int step = 0; step < 40; ++step) {
        const std::vector<uint64_t> mask = m.mask();
        std::vector<int32_t> ok;
        for (int32_t t = 0; t < vocab->n_vocab; ++t) {
          Matcher probe = m;
          const bool accepts = probe.accept_token(t);
          const bool bit = (mask[static_cast<size_t>(t) / 64] >> (t % 64)) & 1;
          ASSERT_EQ(bit, accepts) << "token " << t << " at step " << step;
          if (accepts) ok.push_back(t);
        }
        ASSERT_FALSE(ok.empty());
        const int32_t t = ok[rng() % ok.size()];
        if (t == eos) break;
        ASSERT_TRUE(m.accept_token(t));
      }
    }
  }
}

// `.` and negated classes take well-formed UTF-8 only: no overlong forms, surrogates or code
// points above U+10FFFF, which JSON parsers reject.
TEST(Gbnf, AnyCharacterIsWellFormedUtf8) {
  const auto any = compile_gbnf(R"(root ::= .+)");
  const auto neg = compile_gbnf(R"(root ::= [^a]+)");
  for (const auto& c : {any, neg}) {
    for (const char* ok : {"\xC2\x80", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEF\xBF\xBD", "\xF0\x90\x80\x80",
                           "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"}) {
      EXPECT_TRUE(full_match(c, ok)) << ok;
    }
    for (const char* bad : {"\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF0\x8B\xB3\x80",
                            "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80"}) {
      EXPECT_FALSE(full_match(c, bad)) << bad;
    }
  }
}

// tool_choice auto. Markers written out here, not taken from the code under test.
struct AutoFormat {
  ToolCallFormat format;
  std::string trigger;  // the bytes that open a call block
  std::string lead;     // what must follow them before the name
};
const std::vector<AutoFormat>& auto_formats() {
  static const std::vector<AutoFormat> f = {
      {ToolCallFormat::kR1, "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>function<｜tool▁sep｜>"},
      {ToolCallFormat::kV3_1, "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"},
      {ToolCallFormat::kV3_2, "<｜DSML｜function_calls>", "\n<｜DSML｜invoke name=\""},
      {ToolCallFormat::kV4, "<｜DSML｜tool_calls>", "\n<｜DSML｜invoke name=\""},
  };
  return f;
}

const ojson kWeather = ojson::parse(R"({"type":"object","properties":{
  "city":{"type":"string","maxLength":5},
  "days":{"type":"integer","minimum":1,"maximum":7},
  "unit":{"enum":["c","f"]}},"required":["city","days"]})");

// Bytes, the markers whole and cut, tokens that straddle the end of the trigger (one going on
// with what a call needs, one with what it cannot have), some JSON pieces, and EOS (last).
std::shared_ptr<const TokenVocab> auto_vocab(const AutoFormat& f, std::vector<std::string>* text) {
  std::vector<std::string>& t = *text;
  for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
  const std::string tail = f.trigger.substr(f.trigger.size() - 4);
  for (const std::string& s :
       {f.trigger, f.trigger.substr(0, 7), f.trigger.substr(7), tail + f.lead.substr(0, 3), tail + "x", f.lead,
        std::string("get_weather"), std::string("noop"), std::string("{\""), std::string("\":"), std::string("city"),
        std::string("days"), std::string("\"}"), std::string("</｜DSML｜parameter>\n")}) {
    t.push_back(s);
  }
  t.emplace_back("");  // EOS
  const auto n = static_cast<int32_t>(t.size());
  return TokenVocab::build(
      n, [t](int32_t id) { return t[static_cast<size_t>(id)]; }, [n](int32_t id) { return id == n - 1; });
}

std::shared_ptr<const Constraint> auto_constraint(const AutoFormat& f, std::shared_ptr<const TokenVocab> vocab) {
  ToolCallConstraint c;
  c.format = f.format;
  c.tools = {{"get_weather", kWeather}, {"noop", ojson::parse(R"({"type":"object","properties":{}})")}};
  c.prefix = tool_call_opener(f.format);
  EXPECT_EQ(constrain::tool_call_trigger(f.format), f.trigger);
  auto gbnf = constrain::tool_call_gbnf(c, f.lead);
  EXPECT_TRUE(gbnf.is_ok()) << gbnf.message();
  auto g = constrain::parse_gbnf(gbnf.value());
  EXPECT_TRUE(g.is_ok()) << g.message();
  return std::make_shared<Constraint>(constrain::auto_call_grammar(std::move(g).value(), f.trigger), vocab);
}

bool allowed(Matcher& m, int32_t t) {
  return (m.mask()[static_cast<size_t>(t) / 64] >> (t % 64)) & 1;
}

TEST(AutoToolCall, FreeTextEndsAnywhereAndTheTriggerStartsTheCall) {
  for (const AutoFormat& f : auto_formats()) {
    std::vector<std::string> text;
    const auto vocab = auto_vocab(f, &text);
    const auto c = auto_constraint(f, vocab);
    const int32_t eos = vocab->n_vocab - 1, trigger = 256, head = 257, rest = 258, straddle_ok = 259,
                  straddle_bad = 260;
    Matcher m(c);
    EXPECT_TRUE(allowed(m, eos));  // an empty answer
    ASSERT_TRUE(m.accept_bytes("Let me check <｜the weather｜> \xff\xfe in é."));
    EXPECT_TRUE(allowed(m, eos));
    EXPECT_TRUE(allowed(m, trigger));
    EXPECT_TRUE(allowed(m, head));
    // The trigger's head, then text that leaves it: still free text, EOS allowed.
    Matcher left = m;
    ASSERT_TRUE(left.accept_token(head));
    EXPECT_TRUE(allowed(left, eos));
    ASSERT_TRUE(left.accept_bytes("no call"));
    EXPECT_TRUE(left.can_end());
    // The whole trigger: a call must follow; no EOS until it is complete.
    Matcher in = m;
    ASSERT_TRUE(in.accept_token(head));
    ASSERT_TRUE(in.accept_token(rest));
    EXPECT_FALSE(allowed(in, eos));
    EXPECT_FALSE(in.accept_bytes("hello"));
    EXPECT_TRUE(in.accept_bytes(f.lead));
    // A token that completes the trigger is allowed only if its bytes after it fit the call.
    Matcher cut = m;
    ASSERT_TRUE(cut.accept_bytes(f.trigger.substr(0, f.trigger.size() - 4)));
    EXPECT_TRUE(allowed(cut, straddle_ok)) << text[static_cast<size_t>(straddle_ok)];
    EXPECT_FALSE(allowed(cut, straddle_bad)) << text[static_cast<size_t>(straddle_bad)];
    EXPECT_FALSE(cut.accept_token(straddle_bad));
    EXPECT_TRUE(cut.accept_token(straddle_ok));
  }
}

// Random walks: free text (random allowed tokens), the trigger, then random allowed tokens to
// EOS. Every finished output parses in its format into calls whose arguments validate; masks
// equal token-by-token acceptance along the first walk of each format.
TEST(AutoToolCall, RandomWalksProduceValidCallsInEveryFormat) {
  std::mt19937 rng(11);
  int n_done = 0, n_calls = 0;
  for (const AutoFormat& f : auto_formats()) {
    std::vector<std::string> text;
    const auto vocab = auto_vocab(f, &text);
    const auto c = auto_constraint(f, vocab);
    const int32_t eos = vocab->n_vocab - 1;
    for (int walk = 0; walk < 60; ++walk) {
      Matcher m(c);
      std::string out;
      auto pick = [&](bool free_text) {
        const std::vector<uint64_t> mask = m.mask();
        std::vector<int32_t> ok;
        for (int32_t t = 0; t < vocab->n_vocab; ++t) {
          const bool bit = (mask[static_cast<size_t>(t) / 64] >> (t % 64)) & 1;
          if (walk == 0) {
            Matcher probe = m;
            EXPECT_EQ(bit, probe.accept_token(t)) << "token " << t << " after " << out;
          }
          if (bit && !(free_text && (t == eos || t == 256 || t == 259))) ok.push_back(t);
        }
        return ok.empty() ? eos : ok[rng() % ok.size()];
      };
      for (int i = 0; i < 6; ++i) {  // free text that does not open the call
        const int32_t t = pick(true);
        ASSERT_TRUE(m.accept_token(t));
        out += text[static_cast<size_t>(t)];
      }
      if (out.find(f.trigger.substr(0, 3)) != std::string::npos) continue;  // a partial trigger: skip
      ASSERT_TRUE(m.accept_bytes(f.trigger)) << out;
      out += f.trigger;
      bool done = false;
      for (int step = 0; step < 400 && !done; ++step) {
        const int32_t t = pick(false);
        if (t == eos) {
          done = true;
          break;
        }
        ASSERT_TRUE(m.accept_token(t));
        out += text[static_cast<size_t>(t)];
      }
      if (!done) continue;
      ++n_done;
      const auto parsed = ToolCallParser::parse(out, f.format);
      ASSERT_EQ(parsed.error, "") << tool_call_format_name(f.format) << ": " << out;
      ASSERT_GE(parsed.calls.size(), 1u) << out;
      for (const auto& call : parsed.calls) {
        const ojson args = ojson::parse(call.arguments, nullptr, false);
        ASSERT_FALSE(args.is_discarded()) << out;
        if (call.name == "get_weather") {
          EXPECT_EQ(validate(kWeather, args), "") << tool_call_format_name(f.format) << ": " << out;
        } else {
          EXPECT_EQ(call.name, "noop") << out;
          EXPECT_TRUE(args.is_object()) << out;
        }
        ++n_calls;
      }
    }
  }
  std::printf("auto tool-call walks finished: %d, calls: %d\n", n_done, n_calls);
  EXPECT_GE(n_done, 4 * 60 / 3);
}

}  // namespace
}  // namespace ds::test
