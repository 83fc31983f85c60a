// Golden renderings of every built-in chat format, typed by hand from the format
// descriptions in ../shared/SPEC.md ("Chat formats") and the models' published templates --
// never produced by the renderer. Plus recognition from real template texts, overrides and
// the error messages.
#include "text/chat_template.h"

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "ds/tokenizer.h"
#include "test_util.h"

namespace ds {
namespace {

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";

const std::vector<ChatMessage> kSingle = {{"user", "Hi"}};
const std::vector<ChatMessage> kMulti = {
    {"system", "Be brief."}, {"user", "2+2?"}, {"assistant", "4"}, {"user", "And 3+3?"}};

std::string render(ChatFormat f, const std::vector<ChatMessage>& m, bool gen, const std::string& bos = kBos,
                   const std::string& eos = kEos) {
  auto r = ChatTemplate(f, bos, eos).render(m, gen);
  EXPECT_TRUE(r) << r.message();
  return r ? r.value() : "";
}

TEST(ChatTemplate, DeepSeekV3) {
  EXPECT_EQ(render(ChatFormat::kDeepseek3, kSingle, true), "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>");
  EXPECT_EQ(render(ChatFormat::kDeepseek3, kMulti, true),
            "<｜begin▁of▁sentence｜>Be brief.<｜User｜>2+2?<｜Assistant｜>4<｜end▁of▁sentence｜>"
            "<｜User｜>And 3+3?<｜Assistant｜>");
  EXPECT_EQ(render(ChatFormat::kDeepseek3, kSingle, false), "<｜begin▁of▁sentence｜><｜User｜>Hi");
  // Two system messages are joined by a blank line, ahead of all turns.
  EXPECT_EQ(render(ChatFormat::kDeepseek3, {{"system", "A"}, {"user", "u"}, {"system", "B"}}, false),
            "<｜begin▁of▁sentence｜>A\n\nB<｜User｜>u");
}

TEST(ChatTemplate, DeepSeekR1OpensThinking) {
  EXPECT_EQ(render(ChatFormat::kDeepseekR1, kSingle, true),
            "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜><think>\n");
  // Earlier answers keep only the text after </think>.
  std::vector<ChatMessage> m = kMulti;
  m[2].content = "<think>\nadd them\n</think>\n\n4";
  EXPECT_EQ(render(ChatFormat::kDeepseekR1, m, true),
            "<｜begin▁of▁sentence｜>Be brief.<｜User｜>2+2?<｜Assistant｜>\n\n4<｜end▁of▁sentence｜>"
            "<｜User｜>And 3+3?<｜Assistant｜><think>\n");
  ChatTemplate t(ChatFormat::kDeepseekR1, kBos, kEos);
  EXPECT_TRUE(t.has_reasoning());
  EXPECT_TRUE(t.prompt_opens_reasoning());
}

TEST(ChatTemplate, DeepSeekV2Chat) {
  EXPECT_EQ(render(ChatFormat::kDeepseek2, kSingle, true), "<｜begin▁of▁sentence｜>User: Hi\n\nAssistant:");
  EXPECT_EQ(render(ChatFormat::kDeepseek2, kMulti, true),
            "<｜begin▁of▁sentence｜>Be brief.\n\nUser: 2+2?\n\nAssistant: 4<｜end▁of▁sentence｜>"
            "User: And 3+3?\n\nAssistant:");
  EXPECT_EQ(render(ChatFormat::kDeepseek2, kSingle, false), "<｜begin▁of▁sentence｜>User: Hi\n\n");
}

TEST(ChatTemplate, DeepSeekCoderInstruct) {
  EXPECT_EQ(render(ChatFormat::kDeepseekCoder, kSingle, true),
            "<｜begin▁of▁sentence｜>You are an AI programming assistant, utilizing the Deepseek "
            "Coder model, developed by Deepseek Company, and you only answer questions related to "
            "computer science. For politically sensitive questions, security and privacy issues, "
            "and other non-computer science questions, you will refuse to answer\n"
            "### Instruction:\nHi\n### Response:\n");
  // A system message replaces the preamble (written as-is, as the published template does).
  EXPECT_EQ(render(ChatFormat::kDeepseekCoder, kMulti, true),
            "<｜begin▁of▁sentence｜>Be brief.### Instruction:\n2+2?\n### Response:\n4\n<|EOT|>\n"
            "### Instruction:\nAnd 3+3?\n### Response:\n");
}

TEST(ChatTemplate, ChatML) {
  EXPECT_EQ(render(ChatFormat::kChatml, kSingle, true, "", "<|im_end|>"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(ChatFormat::kChatml, kMulti, true, "", "<|im_end|>"),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n"
            "<|im_start|>assistant\n");
  ChatTemplate t(ChatFormat::kChatml, "", "");
  t.set_default_system("You are helpful.");
  EXPECT_EQ(t.render(kSingle, false).value(),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(t.render(kMulti, false).value().rfind("<|im_start|>system\nBe brief.", 0), 0u);
}

TEST(ChatTemplate, UnknownRoleIsAnError) {
  const std::vector<ChatMessage> m = {{"user", "a"}, {"tool", "b"}};
  auto r = ChatTemplate(ChatFormat::kDeepseek2, kBos, kEos).render(m, true);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("'tool'"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("message 1"), std::string::npos) << r.message();
  const std::vector<ChatMessage> robots = {{"robot", "a"}};
  auto robot = ChatTemplate(ChatFormat::kDeepseek3, kBos, kEos).render(robots, true);
  ASSERT_FALSE(robot);
  EXPECT_NE(robot.message().find("'robot'"), std::string::npos) << robot.message();
}

// DeepSeek-V3's template (the one in ../shared/tokenizer/ggml-vocab-deepseek-v3.gguf) with a
// tool round trip: calls are written for a null content, results go in a tool-outputs block,
// and no generation prompt follows tool results. Typed from the template text.
TEST(ChatTemplate, DeepSeekV3ToolRoundTrip) {
  ChatInput in;
  in.messages = {{"system", "S"},   {"user", "Weather?"},   {"assistant", std::nullopt}, {"tool", "21C"},
                 {"tool", "sunny"}, {"assistant", "Warm."}, {"user", "Thanks"}};
  in.messages[2].tool_calls = {{.id = "call_1",
                                .type = "function",
                                .name = "get_weather",
                                .arguments = nlohmann::ordered_json{{"city", "Paris"}}}};
  ChatTemplate t(ChatFormat::kDeepseek3, kBos, kEos);
  EXPECT_EQ(t.tool_call_format(), ToolCallFormat::kR1);
  auto r = t.render(in);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(*r,
            "<｜begin▁of▁sentence｜>S<｜User｜>Weather?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
            "function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>"
            "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>21C<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>sunny"
            "<｜tool▁output▁end｜><｜tool▁outputs▁end｜>Warm.<｜end▁of▁sentence｜><｜User｜>Thanks<｜Assistant｜>");
  in.messages.resize(5);  // ends with tool results: no generation prompt, the block is closed
  EXPECT_TRUE(t.render(in)->ends_with("<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"));
}

TEST(ChatTemplate, RecognizesTemplateTexts) {
  auto is = [](std::string_view text, ChatFormat f) {
    auto r = ChatTemplate::recognize(text);
    return r && r.value() == f;
  };
  EXPECT_TRUE(is("{{'<｜User｜>' + message['content']}}{{'<｜Assistant｜>'}}", ChatFormat::kDeepseek3));
  EXPECT_TRUE(
      is("{% if '</think>' in content %}{{'<｜User｜>'}}{{'<｜Assistant｜><think>\\n'}}", ChatFormat::kDeepseekR1));
  EXPECT_TRUE(is("{{ 'User: ' + message['content'] + '\\n\\n' }}{{ 'Assistant:' }}", ChatFormat::kDeepseek2));
  EXPECT_TRUE(is("{{'### Instruction:\\n' + c}}{{'### Response:'}}", ChatFormat::kDeepseekCoder));
  EXPECT_TRUE(is("{{'<|im_start|>' + role}}{{'<|im_end|>'}}", ChatFormat::kChatml));
  auto bad = ChatTemplate::recognize("{{ messages | something_else }}");
  ASSERT_FALSE(bad);
  for (const auto& n : ChatTemplate::names()) EXPECT_NE(bad.message().find(n), std::string::npos) << n;
}

TEST(ChatTemplate, FromNameAndOverride) {
  auto t = ChatTemplate::from_name("deepseek-llm", kBos, kEos);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->format(), ChatFormat::kDeepseek2);
  auto bad = ChatTemplate::from_name("llama9", kBos, kEos);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("llama9"), std::string::npos);
  EXPECT_NE(bad.message().find("deepseek-r1"), std::string::npos);
}

TEST(ChatTemplate, FallbackByArchitecture) {
  // DeepSeek-MoE 16B chat: "User: ...\n\nAssistant:" (deepseek-llm); R1-0528-Qwen3: R1 markers.
  EXPECT_STREQ(ChatTemplate::fallback_name("deepseek"), "deepseek2");
  EXPECT_STREQ(ChatTemplate::fallback_name("qwen3"), "deepseek-r1");
  EXPECT_STREQ(ChatTemplate::fallback_name("deepseek2"), "deepseek3");
  EXPECT_STREQ(ChatTemplate::fallback_name("llama"), "deepseek3");
  for (const char* arch : {"deepseek", "qwen3", "qwen2"}) {
    auto t = ChatTemplate::from_name(ChatTemplate::fallback_name(arch), kBos, kEos);
    ASSERT_TRUE(t) << arch;
  }
  auto ds1 = ChatTemplate::from_name(ChatTemplate::fallback_name("deepseek"), kBos, kEos);
  EXPECT_EQ(ds1->render(kSingle, true).value(), kBos + "User: Hi\n\nAssistant:");
  auto qwen3 = ChatTemplate::from_name(ChatTemplate::fallback_name("qwen3"), kBos, kEos);
  EXPECT_EQ(qwen3->render(kSingle, true).value(), kBos + "<｜User｜>Hi<｜Assistant｜><think>\n");
  EXPECT_TRUE(qwen3->has_reasoning());
}

struct Loaded {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
};

Loaded load(const char* vocab) {
  Loaded l;
  auto f = GgufFile::open(test::shared_path(std::string("tokenizer/ggml-vocab-") + vocab + ".gguf"));
  EXPECT_TRUE(f) << f.message();
  l.file = std::move(f).value();
  auto t = Tokenizer::from_gguf(*l.file);
  EXPECT_TRUE(t) << t.message();
  l.tok = std::move(t).value();
  return l;
}

TEST(ChatTemplate, FromSharedFiles) {
  // DeepSeek-V3's real template -> deepseek3, and the rendered prompt tokenizes with its
  // markers as single control tokens (BOS already in the text: add_bos = false).
  Loaded v3 = load("deepseek-v3");
  auto t = ChatTemplate::from_gguf(*v3.file, *v3.tok);
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ(t->format(), ChatFormat::kDeepseek3);
  auto ids = v3.tok->encode(t->render(kSingle, true).value(), false).value();
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 0);      // <｜begin▁of▁sentence｜>
  EXPECT_EQ(ids[1], 128803);      // <｜User｜>
  EXPECT_EQ(ids.back(), 128804);  // <｜Assistant｜>

  // Qwen2.5's template -> chatml with its built-in system prompt.
  Loaded qwen = load("qwen2");
  auto q = ChatTemplate::from_gguf(*qwen.file, *qwen.tok);
  ASSERT_TRUE(q) << q.message();
  EXPECT_EQ(q->format(), ChatFormat::kChatml);
  EXPECT_EQ(q->render(kSingle, true).value(),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");

  // No template in the file: a clear error, unless overridden by name.
  Loaded coder = load("deepseek-coder");
  auto none = ChatTemplate::from_gguf(*coder.file, *coder.tok);
  ASSERT_FALSE(none);
  EXPECT_NE(none.message().find("--chat-template"), std::string::npos) << none.message();
  auto forced = ChatTemplate::from_gguf(*coder.file, *coder.tok, "deepseek-coder");
  ASSERT_TRUE(forced) << forced.message();
  EXPECT_EQ(forced->render(kMulti, false).value().rfind(kBos + "Be brief.### Instruction:", 0), 0u);
}

// A deepseek32 (V3.2) file without a recognizable template gets the deepseek3 format; a
// deepseek2 file in the same state stays an error (above).
TEST(ChatTemplate, Deepseek32FallsBackToDeepseek3) {
  auto f = GgufFile::open(test::shared_path("refdata/tiny-dsv32-Q4_K_M.gguf"));
  ASSERT_TRUE(f) << f.message();
  ASSERT_FALSE((*f)->has("tokenizer.chat_template"));
  auto tok = Tokenizer::from_gguf(**f);
  ASSERT_TRUE(tok) << tok.message();
  auto t = ChatTemplate::from_gguf(**f, **tok);
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ(t->format(), ChatFormat::kDeepseek3);
}

}  // namespace
}  // namespace ds
