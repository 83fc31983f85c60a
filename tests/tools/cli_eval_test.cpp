// ds-cli eval and generate as a user runs them: eval writes float32 logits in the refdata
// layout that match the reference (chunk 7, f32 KV), --dump-layers writes the per-block
// tensors in the refdata .layers layout (blk0.in equal to the reference's bit for bit, the
// rest within the end-to-end tolerance), --perplexity reports a finite number; generate
// streams text; bad arguments exit non-zero with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "refdata.h"
#include "test_util.h"

namespace ds::test {
namespace {

std::string cli() {
  return cli_path();
}

int run(const std::string& cmd, std::string* out) {
  auto r = run_command(cmd + " 2>&1");
  *out = std::move(r.out);
  return r.exit_code;
}

std::vector<float> read_f32(const std::string& path) {
  const auto b = read_file_bytes(path);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

TEST(CliEval, LogitsAndLayerDumpsMatchReference) {
  const std::string M = "tiny-dsv2-Q4_K_M";
  const std::string dir = make_temp_dir("cli-eval");
  std::string out;
  const std::string cmd = cli() + " eval --model " + ref_path(M, ".gguf") + " --tokens-json " + ref_path(M, ".json") +
                          " --logits-out " + dir + "/l.f32 --chunk 7 --kv-type f32 --threads 2 --dump-layers " + dir +
                          "/layers";
  ASSERT_EQ(run(cmd, &out), 0) << out;
  const auto ours = read_f32(dir + "/l.f32");
  const auto ref = ref_logits(M);
  ASSERT_EQ(ours.size(), ref.size());
  EXPECT_LE(nmse(ours.data(), ref.data(), ref.size()), kEndToEndNmse);
  EXPECT_GE(argmax_agreement(ours.data(), ref.data(), 63, ref_n_vocab(M)), kMinArgmaxAgree);

  const auto in0 = read_f32(dir + "/layers/blk0.in.f32");
  const auto ref_in0 = ref_layer(M, "blk0.in.f32");
  ASSERT_EQ(in0.size(), ref_in0.size());
  EXPECT_EQ(std::memcmp(in0.data(), ref_in0.data(), in0.size() * 4), 0);
  for (int il = 0; il < 3; ++il) {
    for (const char* x : {"mid", "out"}) {
      const std::string f = "blk" + std::to_string(il) + "." + x + ".f32";
      const auto a = read_f32(dir + "/layers/" + f);
      const auto b = ref_layer(M, f);
      ASSERT_EQ(a.size(), b.size()) << f;
      EXPECT_LE(nmse(a.data(), b.data(), a.size()), kEndToEndNmse) << f;
    }
  }
  EXPECT_EQ(read_file_bytes(dir + "/layers/blk1.experts.i32").size(), 63u * 2u * 4u);
  EXPECT_FALSE(std::filesystem::exists(dir + "/layers/blk0.experts.i32"));  // dense lead block
}

TEST(CliEval, PerplexityAndGenerate) {
  const std::string M = "tiny-qwen2-Q5_K_S";
  std::string out;
  ASSERT_EQ(run(cli() + " eval --model " + ref_path(M, ".gguf") + " --perplexity " + shared_path("refdata/prompt.txt") +
                    " --ctx 32 --threads 2",
                &out),
            0)
      << out;
  const auto at = out.find("perplexity: ");
  ASSERT_NE(at, std::string::npos) << out;
  const double ppl = std::stod(out.substr(at + 12));
  EXPECT_TRUE(std::isfinite(ppl) && ppl > 1.0) << out;

  ASSERT_EQ(
      run(cli() + " generate --model " + ref_path(M, ".gguf") + " --prompt 'def fib(n):' -n 8 --temp 0 --threads 2",
          &out),
      0)
      << out;
  EXPECT_NE(out.find("8 tokens"), std::string::npos) << out;
}

TEST(CliEval, BadArgumentsFail) {
  std::string out;
  EXPECT_NE(run(cli() + " eval --model " + ref_path("tiny-llama-Q4_K_M", ".gguf"), &out), 0);
  EXPECT_NE(run(cli() + " eval --model /nonexistent.gguf --tokens-json " + ref_path("tiny-llama-Q4_K_M", ".json") +
                    " --logits-out /tmp/x.f32",
                &out),
            0);
  EXPECT_NE(out.find("nonexistent"), std::string::npos) << out;
  EXPECT_NE(run(cli() + " eval --model " + ref_path("tiny-llama-Q4_K_M", ".gguf") + " --tokens-json " +
                    ref_path("tiny-llama-Q4_K_M", ".json") + " --logits-out /tmp/x.f32 --kv-type q3",
                &out),
            0);
  EXPECT_NE(out.find("q3"), std::string::npos) << out;
}

}  // namespace
}  // namespace ds::test
