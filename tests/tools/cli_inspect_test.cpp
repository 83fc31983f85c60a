// ds-cli inspect as a user runs it: every shared file prints its summary and exits 0;
// broken files exit 1 with a message, never by a signal, and quickly.
#include <gtest/gtest.h>

#include <random>

#include "test_util.h"

namespace ds {
namespace {

test::CommandResult run(const std::string& cmd) { return test::run_command(cmd + " 2>&1"); }
std::string cli() { return test::cli_path(); }

TEST(CliInspect, EverySharedFile) {
  for (const char* rel : {"refdata/tiny-llama-Q4_K_M.gguf", "refdata/tiny-qwen2-Q5_K_S.gguf",
                          "refdata/tiny-dsv2-Q4_K_M.gguf", "refdata/tiny-dsv2-legacy-Q4_K_M.gguf",
                          "refdata/tiny-dsv3-Q4_K_M.gguf", "refdata/tiny-ds1-Q4_K_M.gguf",
                          "refdata/tiny-qwen3-Q4_K_M.gguf", "tokenizer/ggml-vocab-deepseek-coder.gguf",
                          "tokenizer/ggml-vocab-deepseek-llm.gguf", "tokenizer/ggml-vocab-deepseek-v3.gguf",
                          "tokenizer/ggml-vocab-qwen2.gguf"}) {
    auto r = run(cli() + " inspect " + test::shared_path(rel));
    EXPECT_EQ(r.exit_code, 0) << rel << "\n" << r.out;
    EXPECT_NE(r.out.find("tokenizer: model=gpt2"), std::string::npos) << rel;
    if (std::string(rel).starts_with("refdata/")) {
      EXPECT_NE(r.out.find("token_embd.weight"), std::string::npos) << rel;
    }
  }
  auto r = run(cli() + " inspect " + test::shared_path("refdata/tiny-dsv3-Q4_K_M.gguf"));
  EXPECT_NE(r.out.find("architecture: deepseek2"), std::string::npos);
  EXPECT_NE(r.out.find("deepseek2.expert_gating_func"), std::string::npos);
  EXPECT_NE(r.out.find("file type: Q4_K_M"), std::string::npos);
  auto ds1 = run(cli() + " inspect " + test::shared_path("refdata/tiny-ds1-Q4_K_M.gguf"));
  EXPECT_NE(ds1.out.find("architecture: deepseek\n"), std::string::npos) << ds1.out;
  EXPECT_NE(ds1.out.find("deepseek.expert_shared_count"), std::string::npos) << ds1.out;
  auto qwen3 = run(cli() + " inspect " + test::shared_path("refdata/tiny-qwen3-Q4_K_M.gguf"));
  EXPECT_NE(qwen3.out.find("architecture: qwen3"), std::string::npos) << qwen3.out;
  EXPECT_NE(qwen3.out.find("blk.0.attn_q_norm.weight"), std::string::npos) << qwen3.out;
}

TEST(CliInspect, BrokenFilesFailCleanly) {
  const std::string dir = test::make_temp_dir("cli-inspect");
  auto bytes = test::read_file_bytes(test::shared_path("refdata/tiny-llama-Q4_K_M.gguf"));
  std::mt19937_64 rng(7);
  for (int i = 0; i < 40; ++i) {
    std::vector<uint8_t> b = bytes;
    if (i % 4 == 0) {
      b.resize(rng() % std::min<size_t>(b.size(), 1 << 16));
    } else {
      for (int m = 0; m < 4; ++m) b[rng() % 2048] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    const std::string path = dir + "/broken.gguf";
    test::write_file_bytes(path, b);
    auto r = run(cli() + " inspect --no-tensors " + path);
    EXPECT_EQ(r.signal, 0) << "killed by signal on mutation " << i;
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out;
    if (r.exit_code == 1) {
      EXPECT_NE(r.out.find("error: "), std::string::npos) << r.out;
    }
    EXPECT_LT(r.seconds, 5.0);
  }
  auto missing = run(cli() + " inspect " + dir + "/nope.gguf");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("nope.gguf"), std::string::npos);
  EXPECT_EQ(run(cli() + " inspect").exit_code, 2);
  EXPECT_EQ(run(cli() + " no-such-command").exit_code, 2);
}

}  // namespace
}  // namespace ds
