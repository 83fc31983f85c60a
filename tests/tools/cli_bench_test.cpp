// ds-cli bench and ds-cli doctor as an operator runs them: bench --json prints exactly one
// JSON object with the documented fields (README), all positive when measured; --depth and
// --profile work; bad arguments and a missing model exit non-zero with a message; doctor
// reports instruction sets, topology, measured limits and recommended flags.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gguf/gguf_file.h"
#include "test_util.h"

namespace ds::test {
namespace {

std::string model() {
  return shared_path("refdata/tiny-dsv3-Q4_K_M.gguf");
}

CommandResult run(const std::string& args) {
  return run_command(cli_path() + " " + args + " 2>&1");
}

// The one line of `out` that starts with '{', parsed; fails the test when there is not exactly one.
nlohmann::json json_line(const std::string& out) {
  std::istringstream in(out);
  std::string line, found;
  int n = 0;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') {
      found = line;
      ++n;
    }
  EXPECT_EQ(n, 1) << out;
  return n == 1 ? nlohmann::json::parse(found) : nlohmann::json::object();
}

TEST(CliBench, JsonHasMeasuredRatesAndLimits) {
  const auto r = run("bench --model " + model() + " -p 8 -n 4 -d 12 -t 2 --batch 2 --repeats 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = json_line(r.out);
  for (const char* k : {"pp_tps", "tg_tps", "batch_tg_tps", "bandwidth_gbs", "int8_gops", "fp32_gflops", "tg_roofline",
                        "pp_roofline"}) {
    ASSERT_TRUE(j.contains(k)) << k << " missing: " << j.dump();
    EXPECT_GT(j[k].get<double>(), 0.0) << k;
  }
  EXPECT_EQ(j["depth"].get<int>(), 12);
  EXPECT_EQ(j["n_prompt"].get<int>(), 8);
  EXPECT_EQ(j["batch"].get<int>(), 2);
  // The limits are read around every repeat: their medians lie within the reported spread.
  for (const char* k : {"bandwidth_gbs", "int8_gops"}) {
    const std::string lo = std::string(k) + "_min", hi = std::string(k) + "_max";
    ASSERT_TRUE(j.contains(lo) && j.contains(hi)) << k << " spread missing: " << j.dump();
    EXPECT_GT(j[lo].get<double>(), 0.0) << k;
    EXPECT_LE(j[lo].get<double>(), j[k].get<double>()) << k;
    EXPECT_LE(j[k].get<double>(), j[hi].get<double>()) << k;
  }
  // Rooflines are fractions of the machine's limits measured in the same run.
  EXPECT_LT(j["tg_roofline"].get<double>(), 5.0);
  EXPECT_LT(j["pp_roofline"].get<double>(), 5.0);
  // A prefill computes the output head for the prompt's last token only: of the 8 prompt
  // tokens' head products, 7 are not counted.
  auto f = GgufFile::open(model());
  ASSERT_TRUE(f.is_ok()) << f.message();
  const GgufTensorInfo* head = (*f)->tensor("output.weight");
  ASSERT_NE(head, nullptr);
  const double head_ops = 2.0 * static_cast<double>(head->n_elements());
  EXPECT_NEAR(j["prefill_ops_per_token"].get<double>(), j["ops_per_token"].get<double>() - head_ops * 7.0 / 8.0, 2.0);
}

// deepseek32's decode reads every indexer key (64 f32 per token) but only the top-k (16)
// latent rows (kv_lora 256 + rope 32, f16): at context 40 + 4/2 = 42, 4 trunk blocks read
// 4 * (42 * 64 * 4 + 16 * 288 * 2) bytes. --chunk prefills the prompt 16 tokens per step.
TEST(CliBench, SparseAttentionCacheBytesAndChunkedPrefill) {
  const auto r = run("bench --model " + shared_path("refdata/tiny-dsv32-Q4_K_M.gguf") +
                     " -p 40 --chunk 16 -n 4 -d 40 -t 2 --batch 0 --repeats 1 --no-limits --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = json_line(r.out);
  ASSERT_TRUE(j.contains("kv_bytes_per_token")) << j.dump();
  EXPECT_EQ(j["kv_bytes_per_token"].get<double>(), 4.0 * (42 * 64 * 4 + 16 * 288 * 2));
  EXPECT_GT(j["pp_tps"].get<double>(), 0.0);
  EXPECT_GT(j["tg_tps"].get<double>(), 0.0);
  // Dense MLA (tiny-dsv3, 4 blocks) reads every latent row: 4 * 42 * 288 * 2.
  const auto d = run("bench --model " + model() + " -p 8 -n 4 -d 40 -t 2 --batch 0 --repeats 1 --no-limits --json");
  ASSERT_EQ(d.exit_code, 0) << d.out;
  EXPECT_EQ(json_line(d.out)["kv_bytes_per_token"].get<double>(), 4.0 * 42 * 288 * 2);
  // --fast-depth decodes at position 4000 without computing the context.
  const auto f = run("bench --model " + shared_path("refdata/tiny-dsv32-Q4_K_M.gguf") +
                     " -p 8 -n 4 -d 4000 --fast-depth -t 2 --batch 0 --repeats 1 --no-limits --json");
  ASSERT_EQ(f.exit_code, 0) << f.out;
  const auto jf = json_line(f.out);
  EXPECT_EQ(jf["kv_bytes_per_token"].get<double>(), 4.0 * (4002 * 64 * 4 + 16 * 288 * 2));
  EXPECT_GT(jf["tg_tps"].get<double>(), 0.0);
  // A bf16 cache keeps the indexer keys in bf16 too: 4 * (42 * 64 * 2 + 16 * 288 * 2).
  const auto h = run("bench --model " + shared_path("refdata/tiny-dsv32-Q4_K_M.gguf") +
                     " -p 8 -n 4 -d 40 --kv-type bf16 -t 2 --batch 0 --repeats 1 --no-limits --json");
  ASSERT_EQ(h.exit_code, 0) << h.out;
  EXPECT_EQ(json_line(h.out)["kv_bytes_per_token"].get<double>(), 4.0 * (42 * 64 * 2 + 16 * 288 * 2));
}

// deepseek4 reads per block the window's raw rows, the compressed rows its attention takes
// and the compressor inputs its pooling reads. tiny-dsv4: 4 trunk blocks of ratios 0, 4, 128,
// 4; head dim 128 (f16 rows of 256 bytes), window 16, indexer rows of 64 f32, top-8. At
// context 42: every block reads 16 raw rows; a ratio-4 block scores 10 indexer rows, takes 8
// compressed rows, and averages 8 positions of 2 x 2 x 128 f32 inputs (and of the indexer's
// 2 x 2 x 64) every 4 tokens; the ratio-128 block has no complete row yet and averages 128
// positions of 2 x 128 f32 every 128 tokens.
TEST(CliBench, CompressedAttentionCacheBytes) {
  const auto r = run("bench --model " + shared_path("refdata/tiny-dsv4-MXFP4_MOE.gguf") +
                     " -p 8 -n 4 -d 40 -t 2 --batch 0 --repeats 1 --no-limits --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const double raw = 16 * 256;
  const double ratio4 = 10 * 64 * 4 + 8 * 256 + (8 * 2 * 2 * 128 * 4) / 4.0 + (8 * 2 * 2 * 64 * 4) / 4.0;
  const double ratio128 = (128 * 2 * 128 * 4) / 128.0;
  EXPECT_EQ(json_line(r.out)["kv_bytes_per_token"].get<double>(), 4 * raw + 2 * ratio4 + ratio128);
}

TEST(CliBench, NoLimitsSkipsTheProbes) {
  const auto r = run("bench --model " + model() + " -p 4 -n 2 --batch 0 --repeats 1 --no-limits --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = json_line(r.out);
  EXPECT_EQ(j["bandwidth_gbs"].get<double>(), 0.0);
  EXPECT_EQ(j["batch_tg_tps"].get<double>(), 0.0);  // --batch 0 skips the aggregate test
  EXPECT_GT(j["tg_tps"].get<double>(), 0.0);
}

TEST(CliBench, ProfileBreaksStepsDownByStage) {
  const auto r = run("bench --model " + model() + " -p 8 -n 2 -d 4 --batch 3 --repeats 1 --no-limits --profile");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* s :
       {"profile of one prefill chunk of 8 tokens", "profile of one decode step",
        "profile of one decode step of 3 sequences", "attention", "router", "ffn_experts", "output_head", "tg2 @ d4"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(CliBench, BadArgumentsExitWithAMessage) {
  auto r = run("bench --model " + model() + " -p 0");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("at least 1"), std::string::npos) << r.out;
  r = run("bench --model " + model() + " --frobnicate");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--frobnicate"), std::string::npos) << r.out;
  r = run("bench --model " + model() + " -d");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = run("bench --model /nonexistent/model.gguf -p 4 -n 2");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/model.gguf"), std::string::npos) << r.out;
  EXPECT_EQ(r.signal, 0);
}

TEST(CliDoctor, ReportsHostAndRecommendations) {
  const auto r = run("doctor");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* s :
       {"instruction sets:", "AVX2", "AVX-512", "AMX", "NUMA nodes:", "transparent huge pages", "read bandwidth:",
        "int8 dot-product peak:", "float32 FMA peak:", "recommended ds-server flags:", "--threads", "--numa"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

}  // namespace
}  // namespace ds::test
