// ds-cli inspect as a user runs it: every shared file prints its summary and exits 0;
// broken files exit 1 with a message, never by a signal, and quickly.
#include <gtest/gtest.h>

#include <random>

#include "test_util.h"

namespace ds {
namespace {

test::CommandResult run(const std::string& cmd) {
  return test::run_command(cmd + " 2>&1");
}
std::string cli() {
  return test::cli_path();
}

TEST(CliInspect, EverySharedFile) {
  for (const char* rel :
       {"refdata/tiny-llama-Q4_K_M.gguf", "refdata/tiny-qwen2-Q5_K_S.gguf", "refdata/tiny-dsv2-Q4_K_M.gguf",
        "refdata/tiny-dsv2-legacy-Q4_K_M.gguf", "refdata/tiny-dsv3-Q4_K_M.gguf", "refdata/tiny-dsv3-IQ-MIX.gguf",
        "refdata/tiny-ds1-Q4_K_M.gguf", "refdata/tiny-qwen3-Q4_K_M.gguf", "tokenizer/ggml-vocab-deepseek-coder.gguf",
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

// The i-quant mixture: every type listed, --check validates all blocks, --help names the
// supported types.
TEST(CliInspect, IQuantMixtureAndSupportedTypes) {
  auto r = run(cli() + " inspect --check " + test::shared_path("refdata/tiny-dsv3-IQ-MIX.gguf"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  for (const char* t :
       {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_NL", "IQ4_XS", "MXFP4"}) {
    EXPECT_NE(r.out.find(std::string(" ") + t + " x"), std::string::npos) << t << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("blk.3.ffn_down_exps.weight               MXFP4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check: every tensor's blocks are valid"), std::string::npos) << r.out;
  auto help = run(cli() + " inspect --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("supported tensor types: F32, F16, Q4_0"), std::string::npos) << help.out;
  for (const char* t : {"IQ1_M", "IQ4_XS", "MXFP4", "BF16"}) EXPECT_NE(help.out.find(t), std::string::npos) << t;
}

// A tensor of a type this project does not read (ik_llama.cpp's IQ4_K, id 137) is an error
// naming the type id and the tensor; a NaN scale fails --check naming the tensor.
TEST(CliInspect, UnsupportedTypeAndBadBlocksNameTheTensor) {
  const std::string dir = test::make_temp_dir("cli-inspect-types");
  auto file = [&](uint32_t type, uint64_t ne0, std::vector<uint8_t> data) {
    std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
    auto put = [&](auto v) {
      const auto* p = reinterpret_cast<const uint8_t*>(&v);
      b.insert(b.end(), p, p + sizeof(v));
    };
    const std::string name = "blk.0.ffn_down_exps.weight";
    put(uint32_t{3}), put(uint64_t{1}), put(uint64_t{0});
    put(uint64_t{name.size()});
    b.insert(b.end(), name.begin(), name.end());
    put(uint32_t{1}), put(ne0), put(type), put(uint64_t{0});
    while (b.size() % 32) b.push_back(0);
    b.insert(b.end(), data.begin(), data.end());
    const std::string path = dir + "/t" + std::to_string(type) + ".gguf";
    test::write_file_bytes(path, b);
    return path;
  };
  auto r = run(cli() + " inspect " + file(137, 256, std::vector<uint8_t>(256, 0)));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("tensor 'blk.0.ffn_down_exps.weight': unknown or unsupported tensor type 137"),
            std::string::npos)
      << r.out;
  std::vector<uint8_t> iq4(18, 0);
  iq4[1] = 0x7E;  // d = NaN
  const std::string bad = file(20, 32, iq4);
  EXPECT_EQ(run(cli() + " inspect " + bad).exit_code, 0) << "without --check the data is not read";
  r = run(cli() + " inspect --check " + bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("tensor 'blk.0.ffn_down_exps.weight' (IQ4_NL): block 0: d is"), std::string::npos) << r.out;
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
      EXPECT_NE(r.out.find("ds-cli inspect: "), std::string::npos) << r.out;
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
