#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

namespace ds::test {

std::string shared_dir() {
  const char* env = std::getenv("DS_SHARED");
  std::string dir = env && *env ? env : DS_SHARED_DEFAULT;
  if (!std::filesystem::is_directory(dir)) {
    // Fatal for the whole binary, not a test failure: a failure inside SetUpTestSuite makes
    // GoogleTest report the suite's tests as skipped, which ctest counts as passing.
    std::fprintf(stderr, "FAILED: shared test data not found at %s (set DS_SHARED)\n", dir.c_str());
    std::exit(1);
  }
  return dir;
}

std::string shared_path(const std::string& rel) {
  return shared_dir() + "/" + rel;
}

std::string binary_dir() {
  return DS_BINARY_DIR;
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string read_file_text(const std::string& path) {
  auto b = read_file_bytes(path);
  return std::string(b.begin(), b.end());
}

void write_file_bytes(const std::string& path, const std::vector<uint8_t>& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::string make_temp_dir(const std::string& tag) {
  static std::mt19937_64 rng(std::random_device{}());
  auto dir = std::filesystem::temp_directory_path() / ("ds-test-" + tag + "-" + std::to_string(rng() % 1000000000ULL));
  std::filesystem::create_directories(dir);
  return dir.string();
}

CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) r.signal = WTERMSIG(st);
  return r;
}

std::string cli_path() {
  return binary_dir() + "/src/ds-cli";
}

}  // namespace ds::test
