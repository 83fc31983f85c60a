// ds-cli tokenize as scripts use it: --ids prints exactly one line of the reference ids
// (checked against a shared .out line), --file reads bytes exactly, errors exit 1 with a message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "test_util.h"

namespace ds {
namespace {

test::CommandResult run(const std::string& cmd) {
  return test::run_command(cmd);
}
std::string cli() {
  return test::cli_path();
}
std::string vocab(const char* name) {
  return test::shared_path(std::string("tokenizer/ggml-vocab-") + name + ".gguf");
}

TEST(CliTokenize, IdsLineMatchesReference) {
  const std::string inp = test::read_file_text(test::shared_path("tokenizer/ggml-vocab-deepseek-v3.gguf.inp"));
  const std::string out = test::read_file_text(test::shared_path("tokenizer/ggml-vocab-deepseek-v3.gguf.out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  // Cases go through --file (byte-exact: CR, tabs, trailing spaces).
  std::vector<std::string> texts, lines;
  for (size_t pos = 0, next; (next = inp.find(sep, pos)) != std::string::npos; pos = next + sep.size()) {
    texts.push_back(inp.substr(pos, next - pos));
  }
  for (size_t pos = 0, next; (next = out.find('\n', pos)) != std::string::npos; pos = next + 1) {
    lines.push_back(out.substr(pos, next - pos));
  }
  ASSERT_EQ(texts.size(), lines.size());
  const std::string dir = test::make_temp_dir("cli-tokenize");
  size_t checked = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    // Every eleventh case (process start-up and vocabulary load dominate the run time).
    if (texts[i].empty() || i % 11 != 1) continue;
    const std::string path = dir + "/case.txt";
    test::write_file_bytes(path, std::vector<uint8_t>(texts[i].begin(), texts[i].end()));
    auto r = run(cli() + " tokenize --model " + vocab("deepseek-v3") + " --ids --no-bos --file " + path);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // The .out line has a leading space before each id; ours is space-separated.
    EXPECT_EQ(" " + r.out, lines[i] + "\n") << "case " << i;
    ++checked;
  }
  EXPECT_GE(checked, 4u);
}

TEST(CliTokenize, BosAndPieces) {
  auto r = run(cli() + " tokenize --model " + vocab("deepseek-coder") + " --ids 'Hello world'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("32013 ", 0), 0u) << r.out;  // BOS first
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "exactly one line: " << r.out;
  auto p = run(cli() + " tokenize --model " + vocab("deepseek-coder") + " 'Hello world'");
  ASSERT_EQ(p.exit_code, 0) << p.out;
  EXPECT_NE(p.out.find("' world'"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("(control)"), std::string::npos) << p.out;
}

TEST(CliTokenize, NoSpecialTokenizesControlTextAsText) {
  auto on = run(cli() + " tokenize --model " + vocab("deepseek-v3") + " --ids --no-bos '<｜User｜>'");
  auto off = run(cli() + " tokenize --model " + vocab("deepseek-v3") + " --ids --no-bos --no-special '<｜User｜>'");
  EXPECT_EQ(on.out, "128803\n");
  EXPECT_NE(off.out, on.out);
}

TEST(CliTokenize, ErrorsExitOneWithAMessage) {
  auto r = run(cli() + " tokenize --model /nonexistent.gguf hi 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("nonexistent"), std::string::npos) << r.out;
  auto bad = run(cli() + " tokenize --model " + vocab("qwen2") + " --pre nope hi 2>&1");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("nope"), std::string::npos) << bad.out;
  const std::string dir = test::make_temp_dir("cli-tokenize-bad");
  test::write_file_bytes(dir + "/bad.txt", {'a', 0xFF});
  auto inv = run(cli() + " tokenize --model " + vocab("qwen2") + " --file " + dir + "/bad.txt 2>&1");
  EXPECT_EQ(inv.exit_code, 1);
  EXPECT_NE(inv.out.find("UTF-8"), std::string::npos) << inv.out;
  EXPECT_EQ(run(cli() + " tokenize 2>&1").exit_code, 2);
}

}  // namespace
}  // namespace ds
