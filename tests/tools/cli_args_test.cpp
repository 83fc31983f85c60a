// ds-cli as a careless or hostile user runs it: every malformed numeric option is a usage
// error (exit 2) naming the option; a FIFO or a directory given as a file is an error
// (exit 1), never a hang; --set values a loader would reject make synth fail (exit 1) and
// leave no file. Each case states its expected exit code.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>

#include "test_util.h"

namespace ds {
namespace {

test::CommandResult run(const std::string& cmd) {
  return test::run_command("timeout 60 " + cmd + " 2>&1");
}
std::string cli() {
  return test::cli_path();
}
std::string model() {
  return test::shared_path("refdata/tiny-llama-Q4_K_M.gguf");
}

struct Case {
  std::string args;
  int exit_code;
  std::string needle;  // in the output
};

void expect_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    auto r = run(cli() + " " + c.args);
    EXPECT_EQ(r.signal, 0) << c.args;
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << c.args << "\n" << r.out;
  }
}

TEST(CliArgs, BadNumbersAreUsageErrors) {
  const std::string gen = "generate --model " + model() + " --prompt hi ";
  expect_cases({
      {gen + "-n 2147483647", 2, "-n must be an integer in [0, 16777216]"},
      {gen + "-n -1", 2, "-n must be"},
      {gen + "-n 12abc", 2, "-n must be"},
      {gen + "--ctx -5", 2, "--ctx must be"},
      {gen + "--threads -1", 2, "--threads must be an integer in [0, 4096]"},
      {gen + "--threads 100000", 2, "--threads must be"},
      {gen + "--temp nan", 2, "--temp must be a number"},
      {gen + "--temp inf", 2, "--temp must be a number"},
      {gen + "--temp -1", 2, "--temp must be a number"},
      {gen + "--seed x", 2, "--seed must be"},
      {"eval --model " + model() + " --perplexity x --ctx -5", 2, "--ctx must be an integer in [2,"},
      {"eval --model " + model() + " --perplexity x --threads abc", 2, "--threads must be"},
      {"doctor --threads abc", 2, "--threads must be an integer"},
      {"doctor --threads -1 --no-measure", 2, "--threads must be"},
      {"doctor --bandwidth-mib 0", 2, "--bandwidth-mib must be"},
  });
}

// Every failure is one line "ds-cli <command>: <message>"; a usage error also points at --help.
TEST(CliArgs, FailuresNameTheCommand) {
  expect_cases({
      {"inspect", 2, "ds-cli inspect: no FILE given\n`ds-cli inspect --help` describes its options."},
      {"tokenize --model " + model(), 2, "ds-cli tokenize: needs either TEXT or --file"},
      {"quantize a b", 2, "ds-cli quantize: wants IN OUT TYPE, got 2 arguments"},
      {"quantize a b Q4_K_M --threads 0", 2, "ds-cli quantize: --threads must be an integer in [1, 1024]"},
      {"synth --shape tiny-llama", 2, "ds-cli synth: needs --out"},
      {"bench --model " + model() + " -p 0", 2, "ds-cli bench: -p, -n and --repeats must be at least 1"},
      {"eval --model " + model(), 2, "ds-cli eval: needs --model and either --perplexity"},
      {"generate --model " + model(), 2, "ds-cli generate: needs --model and --prompt"},
      {"inspect /nonexistent/m.gguf", 1, "ds-cli inspect: "},
  });
}

TEST(CliArgs, NonRegularFilesAreErrorsNotHangs) {
  const std::string dir = test::make_temp_dir("cli-args");
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_cases({
      {"inspect " + fifo, 1, "not a regular file"},
      {"inspect " + dir, 1, "not a regular file"},
      {"tokenize --model " + model() + " --file " + dir, 1, "not a regular file (a directory)"},
      {"tokenize --model " + model() + " --file " + fifo, 1, "not a regular file"},
      {"tokenize --model " + fifo + " hello", 1, "not a regular file"},
      {"eval --model " + model() + " --perplexity " + fifo, 1, "not a regular file"},
      {"eval --model " + model() + " --tokens-json " + dir + " --logits-out " + dir + "/l.bin", 1,
       "not a regular file"},
      {"generate --model " + fifo + " --prompt hi", 1, "not a regular file"},
  });
}

TEST(CliArgs, SynthRejectsHyperParametersALoaderWouldReject) {
  const std::string dir = test::make_temp_dir("cli-synth-set");
  const std::string out = dir + "/m.gguf";
  expect_cases({
      {"synth --shape tiny-llama --out " + out + " --set head_count=0", 1, "attention.head_count = 0"},
      {"synth --shape tiny-llama --out " + out + " --set rope.freq_base=0", 1, "llama.rope.freq_base = 0"},
      {"synth --shape tiny-llama --out " + out + " --set rope.freq_base=inf", 1, "rope.freq_base = inf"},
      {"synth --shape tiny-llama --out " + out + " --set attention.layer_norm_rms_epsilon=nan", 1,
       "layer_norm_rms_epsilon = nan"},
      {"synth --shape tiny-llama --out " + out + " --set attention.layer_norm_rms_epsilon=-1", 1,
       "layer_norm_rms_epsilon = -1"},
      {"synth --shape tiny-llama --out " + out + " --set rope.dimension_count=7", 1, "must be even"},
      {"synth --shape tiny-dsv3 --out " + out + " --set expert_weights_scale=nan", 1, "expert_weights_scale = nan"},
  });
  EXPECT_FALSE(std::filesystem::exists(out));
  // A legal override still writes a loadable model.
  expect_cases({{"synth --shape tiny-llama --out " + out + " --set head_count=2", 0, "wrote"}});
  expect_cases({{"inspect --no-tensors " + out, 0, "llama.attention.head_count"}});
}

}  // namespace
}  // namespace ds
