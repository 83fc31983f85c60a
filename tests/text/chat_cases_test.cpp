// The published DeepSeek chat templates against ../shared/chat: every render case
// (render_cases.json: messages, tools and switches -> the exact prompt that Jinja2 writes
// under Hugging Face's settings) byte for byte, recognition of each template file, and every
// tool-call parse case (parse_cases.json), whole and streamed in small pieces; a GGUF's template
// recognized exactly, by its markers, or not at all (with the warning naming the fallback).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "text/chat_template.h"
#include "ds/tokenizer.h"
#include "text/tool_call_parser.h"
#include "test_util.h"

namespace ds {
namespace {

using json = nlohmann::ordered_json;

json load_json(const std::string& rel) {
  return json::parse(test::read_file_text(test::shared_path(rel)));
}

// A render case's input, as the API layer would fill it from a request.
ChatInput to_input(const json& in) {
  ChatInput c;
  for (const json& m : in.at("messages")) {
    ChatMessage msg;
    msg.role = m.at("role").get<std::string>();
    if (m.contains("content") && m["content"].is_string()) msg.content = m["content"].get<std::string>();
    if (m.contains("reasoning_content") && m["reasoning_content"].is_string()) {
      msg.reasoning_content = m["reasoning_content"].get<std::string>();
    }
    for (const json& tc : m.value("tool_calls", json::array())) {
      msg.tool_calls.push_back({.id = tc.value("id", ""),
                                .type = tc.value("type", "function"),
                                .name = tc.at("function").at("name").get<std::string>(),
                                .arguments = tc.at("function").at("arguments")});
    }
    msg.tool_call_id = m.value("tool_call_id", "");
    c.messages.push_back(std::move(msg));
  }
  c.add_generation_prompt = in.at("add_generation_prompt").get<bool>();
  if (in.contains("tools")) c.tools = in["tools"];
  if (in.contains("thinking")) c.thinking = in["thinking"].get<bool>();
  if (in.contains("reasoning_effort")) c.reasoning_effort = in["reasoning_effort"].get<std::string>();
  if (in.contains("response_format")) c.response_format = in["response_format"];
  return c;
}

std::string first_mismatch(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) + "\n  want: ..." + want.substr(from, 120) + "\n  got:  ..." +
         got.substr(from, 120);
}

TEST(ChatCases, EveryTemplateFileIsRecognizedExactly) {
  const std::pair<const char*, ChatFormat> files[] = {
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", ChatFormat::kDeepseekR1DistillLlama},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ChatFormat::kDeepseekR1DistillQwen},
      {"deepseek-ai-DeepSeek-V3.1.jinja", ChatFormat::kDeepseekV3_1},
      {"deepseek-ai-DeepSeek-V3.2.jinja", ChatFormat::kDeepseekV3_2},
      {"deepseek-ai-DeepSeek-V4.jinja", ChatFormat::kDeepseekV4},
      {"deepseek-ai-DeepSeek-V4-Flash-0731.jinja", ChatFormat::kDeepseekV4Flash},
  };
  for (const auto& [file, format] : files) {
    const std::string text = test::read_file_text(test::shared_path(std::string("chat/templates/") + file));
    ASSERT_FALSE(text.empty()) << file;
    auto exact = ChatTemplate::recognize_exact(text);
    ASSERT_TRUE(exact.has_value()) << file;
    EXPECT_EQ(*exact, format) << file;
    // An edited copy is no longer exact, but its markers still choose the family.
    const std::string edited = text + "{# local edit #}";
    EXPECT_FALSE(ChatTemplate::recognize_exact(edited).has_value()) << file;
    auto by_markers = ChatTemplate::recognize(edited);
    ASSERT_TRUE(by_markers) << file;
    EXPECT_EQ(ChatTemplate(*by_markers, "", "").tool_call_format(), ChatTemplate(format, "", "").tool_call_format())
        << file;
  }
}

TEST(ChatCases, TojsonWritesWhatPythonJsonDumpsWrites) {
  // Expected texts from Python 3: json.dumps(value, ensure_ascii=False).
  const json floats = json::parse(
      "[1e15, 1e16, 0.0001, 0.00001, 1.5, -0.0, 100.0, 3.14159, 1e300, 2.5e-8, 123456789.125, 0.1, "
      "0.3333333333333333, -2.5e-05]");
  EXPECT_EQ(chat_tojson(floats),
            "[1000000000000000.0, 1e+16, 0.0001, 1e-05, 1.5, -0.0, 100.0, 3.14159, 1e+300, 2.5e-08, 123456789.125, "
            "0.1, 0.3333333333333333, -2.5e-05]");
  const json mixed = json::parse(R"({"a": "é\n\"\\ \u0001", "b": [], "c": {}, "d": [1, {"e": null, "f": true}]})");
  EXPECT_EQ(chat_tojson(mixed), R"({"a": "é\n\"\\ \u0001", "b": [], "c": {}, "d": [1, {"e": null, "f": true}]})");
}

TEST(ChatCases, AllRenderCasesByteForByte) {
  const json data = load_json("chat/render_cases.json");
  const std::string bos = data.at("bos_token").get<std::string>();
  const json& cases = data.at("cases");
  ASSERT_EQ(cases.size(), 160u);
  int n_pass = 0;
  for (const json& c : cases) {
    const std::string file = c.at("template").get<std::string>();
    const std::string text = test::read_file_text(test::shared_path("chat/templates/" + file));
    auto format = ChatTemplate::recognize_exact(text);
    ASSERT_TRUE(format.has_value()) << file;
    ChatTemplate t(*format, bos, data.at("eos_token").get<std::string>());
    auto r = t.render(to_input(c.at("input")));
    ASSERT_TRUE(r) << file << " " << c["case"] << ": " << r.message();
    const std::string want = c.at("expected").get<std::string>();
    if (*r == want) {
      ++n_pass;
    } else {
      ADD_FAILURE() << file << " " << c["case"].get<std::string>() << ": " << first_mismatch(want, *r);
    }
  }
  EXPECT_EQ(n_pass, 160);
}

long occurrences(const std::string& text, const std::string& what) {
  long n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ChatCases, RenderedPromptsHoldOneBosAndSingleTokenMarkers) {
  // DeepSeek-V3's vocabulary (V3.1, V3.2 and V4 keep its control tokens): the prompt starts with
  // the BOS text, so it is tokenized without adding one (as the server does).
  auto file = GgufFile::open(test::shared_path("tokenizer/ggml-vocab-deepseek-v3.gguf"));
  ASSERT_TRUE(file) << file.message();
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok) << tok.message();
  const json data = load_json("chat/render_cases.json");
  for (const json& c : data.at("cases")) {
    const std::string text = c.at("expected").get<std::string>();
    auto ids = (*tok)->encode(text, /*add_bos=*/false, /*parse_special=*/true);
    ASSERT_TRUE(ids) << ids.message();
    ASSERT_FALSE(ids->empty());
    EXPECT_EQ(ids->front(), (*tok)->bos()) << c["case"];
    EXPECT_EQ(std::count(ids->begin(), ids->end(), (*tok)->bos()), 1) << c["case"];
    // Each <｜User｜> marker is its one control token (id 128803).
    EXPECT_EQ(std::count(ids->begin(), ids->end(), 128803), occurrences(text, "<｜User｜>")) << c["case"];
  }
}

ToolCallFormat format_named(const std::string& name) {
  for (ToolCallFormat f : {ToolCallFormat::kR1, ToolCallFormat::kV3_1, ToolCallFormat::kV3_2, ToolCallFormat::kV4}) {
    if (name == tool_call_format_name(f)) return f;
  }
  ADD_FAILURE() << "unknown format " << name;
  return ToolCallFormat::kNone;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \n\r\t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \n\r\t") - a + 1);
}

struct Parsed {
  std::string reasoning, content;
  std::vector<ParsedToolCall> calls;
  std::string error;
};

// The server's path: reasoning split first, then the calls in the content. piece = 0: the
// whole text at once; otherwise pushed `piece` bytes at a time.
Parsed parse_output(const std::string& out, bool thinking, ToolCallFormat f, size_t piece) {
  ReasoningSplitter split(thinking);
  ToolCallParser calls(f);
  Parsed p;
  std::vector<std::string> args;
  auto take = [&](const std::vector<ToolCallEvent>& events) {
    for (const ToolCallEvent& e : events) {
      if (e.kind == ToolCallEvent::Kind::kContent) p.content += e.text;
      if (e.kind == ToolCallEvent::Kind::kCallBegin) {
        EXPECT_EQ(e.index, static_cast<int>(args.size()));
        args.emplace_back();
      }
      if (e.kind == ToolCallEvent::Kind::kArguments) args.at(e.index) += e.text;
    }
  };
  const size_t step = piece == 0 ? out.size() : piece;
  for (size_t i = 0; i < out.size(); i += step) {
    auto d = split.push(std::string_view(out).substr(i, step));
    p.reasoning += d.reasoning;
    take(calls.push(d.content));
  }
  auto d = split.flush();
  p.reasoning += d.reasoning;
  take(calls.push(d.content));
  take(calls.flush());
  p.calls = calls.calls();
  p.error = calls.error();
  // The streamed argument fragments add up to each call's arguments.
  EXPECT_EQ(args.size(), p.calls.size());
  for (size_t i = 0; i < args.size() && i < p.calls.size(); ++i) EXPECT_EQ(args[i], p.calls[i].arguments);
  return p;
}

TEST(ChatCases, AllParseCases) {
  const json data = load_json("chat/parse_cases.json");
  const json& cases = data.at("cases");
  ASSERT_EQ(cases.size(), 10u);
  for (size_t ic = 0; ic < cases.size(); ++ic) {
    const json& c = cases[ic];
    const ToolCallFormat f = format_named(c.at("format").get<std::string>());
    const json& want = c.at("expected");
    for (size_t piece : {size_t{0}, size_t{1}, size_t{3}, size_t{7}}) {
      SCOPED_TRACE("case " + std::to_string(ic) + " (" + c["format"].get<std::string>() + "), piece " +
                   std::to_string(piece));
      Parsed p = parse_output(c.at("output").get<std::string>(), c.at("thinking").get<bool>(), f, piece);
      EXPECT_EQ(p.error, "");
      EXPECT_EQ(trim(p.reasoning), want.at("reasoning_content").get<std::string>());
      EXPECT_EQ(trim(p.content), want.at("content").get<std::string>());
      ASSERT_EQ(p.calls.size(), want.at("tool_calls").size());
      for (size_t i = 0; i < p.calls.size(); ++i) {
        EXPECT_EQ(p.calls[i].name, want["tool_calls"][i].at("name").get<std::string>());
        EXPECT_EQ(json::parse(p.calls[i].arguments), want["tool_calls"][i].at("arguments")) << p.calls[i].arguments;
      }
    }
  }
}

TEST(ToolCallParser, MalformedAndUnfinishedCallsAreErrors) {
  auto bad_json = ToolCallParser::parse(
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": <｜tool▁call▁end｜>", ToolCallFormat::kV3_1);
  EXPECT_NE(bad_json.error.find("'f'"), std::string::npos) << bad_json.error;
  auto cut = ToolCallParser::parse(
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"true\">ab",
      ToolCallFormat::kV4);
  EXPECT_NE(cut.error.find("ended inside the call to 'f'"), std::string::npos) << cut.error;
  // Text that only looks like the start of a marker is content.
  auto text = ToolCallParser::parse("a <｜tool and more", ToolCallFormat::kV3_1);
  EXPECT_EQ(text.error, "");
  EXPECT_EQ(text.content, "a <｜tool and more");
  EXPECT_TRUE(text.calls.empty());
}

TEST(ToolCallParser, StringParametersAreEscapedAndOneCallCanBeKept) {
  const std::string out =
      "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"w\">\n<｜DSML｜parameter name=\"s\" "
      "string=\"true\">say \"hi\"\nnow</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke "
      "name=\"x\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
  auto all = ToolCallParser::parse(out, ToolCallFormat::kV3_2);
  ASSERT_EQ(all.calls.size(), 2u) << all.error;
  EXPECT_EQ(all.calls[0].arguments, R"({"s": "say \"hi\"\nnow"})");
  EXPECT_EQ(all.calls[1].arguments, "{}");
  ToolCallParser one(ToolCallFormat::kV3_2, 1);
  one.push(out);
  one.flush();
  ASSERT_EQ(one.calls().size(), 1u);
  EXPECT_EQ(one.calls()[0].name, "w");
}

TEST(ToolCallParser, OpenerPrefillParsesAsTheCallStart) {
  // A forced call's prefill followed by what the model writes is one well-formed call.
  const std::pair<ToolCallFormat, std::string> rest[] = {
      {ToolCallFormat::kR1, "{\"a\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::kV3_1, "{\"a\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::kV3_2,
       "<｜DSML｜parameter name=\"a\" "
       "string=\"false\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"},
      {ToolCallFormat::kV4,
       "<｜DSML｜parameter name=\"a\" "
       "string=\"false\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"},
  };
  for (const auto& [f, tail] : rest) {
    auto w = ToolCallParser::parse(tool_call_opener(f, "get") + tail, f);
    ASSERT_EQ(w.calls.size(), 1u) << tool_call_format_name(f) << ": " << w.error;
    EXPECT_EQ(w.calls[0].name, "get");
    EXPECT_EQ(json::parse(w.calls[0].arguments), json({{"a", 1}}));
    EXPECT_EQ(w.content, "");
  }
}

}  // namespace
}  // namespace ds

namespace ds {
namespace {

// A copy of the DeepSeek-V3 vocabulary file with another tokenizer.chat_template.
std::string vocab_with_template(const std::string& tmpl, const std::string& dir) {
  auto src = GgufFile::open(test::shared_path("tokenizer/ggml-vocab-deepseek-v3.gguf"));
  EXPECT_TRUE(src) << src.message();
  GgufWriter w;
  for (const auto& [k, v] : (*src)->metadata()) w.set(k, v);
  w.set("tokenizer.chat_template", gguf_str(tmpl));
  const std::string path = dir + "/vocab.gguf";
  EXPECT_TRUE(w.begin(path).is_ok());
  EXPECT_TRUE(w.finish().is_ok());
  return path;
}

struct FromFile {
  ChatFormat format;
  std::string warning;
};

FromFile from_file(const std::string& tmpl) {
  const std::string dir = test::make_temp_dir("chat_tmpl");
  auto file = GgufFile::open(vocab_with_template(tmpl, dir));
  EXPECT_TRUE(file) << file.message();
  auto tok = Tokenizer::from_gguf(**file);
  EXPECT_TRUE(tok) << tok.message();
  auto t = ChatTemplate::from_gguf(**file, **tok);
  EXPECT_TRUE(t) << t.message();
  std::filesystem::remove_all(dir);
  return {t->format(), t->warning()};
}

TEST(ChatCases, GgufTemplatesExactByMarkersOrFallbackWithAWarning) {
  const std::string v4 = test::read_file_text(test::shared_path("chat/templates/deepseek-ai-DeepSeek-V4.jinja"));
  FromFile exact = from_file(v4);
  EXPECT_EQ(exact.format, ChatFormat::kDeepseekV4);
  EXPECT_EQ(exact.warning, "");
  FromFile edited = from_file(v4 + "{# edited #}");
  EXPECT_EQ(edited.format, ChatFormat::kDeepseekV4);
  EXPECT_NE(edited.warning.find("'deepseek-v4'"), std::string::npos) << edited.warning;
  FromFile unknown = from_file("{{ messages | something_else }}");
  EXPECT_EQ(unknown.format, ChatFormat::kDeepseek3);
  EXPECT_NE(unknown.warning.find("falling back to 'deepseek3'"), std::string::npos) << unknown.warning;
}

// --chat-template-file: a template from a file is recognized as the GGUF's own would be.
TEST(ChatCases, TemplateTextFromAFileLikeTheGgufTemplate) {
  const std::string v31 = test::read_file_text(test::shared_path("chat/templates/deepseek-ai-DeepSeek-V3.1.jinja"));
  ASSERT_FALSE(v31.empty());
  ChatTemplate exact = ChatTemplate::from_text(v31, "v31.jinja", "<s>", "</s>");
  EXPECT_EQ(exact.format(), ChatFormat::kDeepseekV3_1);
  EXPECT_EQ(exact.warning(), "");
  ChatTemplate edited = ChatTemplate::from_text(v31 + "{# edited #}", "v31-edited.jinja", "", "");
  EXPECT_EQ(edited.format(), ChatFormat::kDeepseekV3_1);
  EXPECT_NE(edited.warning().find("v31-edited.jinja"), std::string::npos) << edited.warning();
  EXPECT_NE(edited.warning().find("'deepseek-v3.1'"), std::string::npos) << edited.warning();
  ChatTemplate unknown = ChatTemplate::from_text("{{ messages | something_else }}", "my.jinja", "", "");
  EXPECT_EQ(unknown.format(), ChatFormat::kDeepseek3);
  EXPECT_NE(unknown.warning().find("my.jinja is not a known chat format; falling back to 'deepseek3'"),
            std::string::npos)
      << unknown.warning();
}

}  // namespace
}  // namespace ds
