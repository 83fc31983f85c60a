// Random mutations of real GGUF headers (bit flips, byte overwrites with boundary values,
// truncations): the reader must return (ok or a Status) every time, promptly. Runs with
// any compiler; the libFuzzer target (gguf_fuzz_target.cpp) explores further under clang.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "gguf/gguf_file.h"
#include "test_util.h"

namespace ds {
namespace {

TEST(GgufMutation, RandomCorruptionsNeverCrash) {
  const std::string dir = test::make_temp_dir("gguf-mut");
  std::vector<std::vector<uint8_t>> seeds;
  for (const char* rel : {"refdata/tiny-dsv3-Q4_K_M.gguf", "tokenizer/ggml-vocab-deepseek-coder.gguf"}) {
    auto bytes = test::read_file_bytes(test::shared_path(rel));
    bytes.resize(std::min<size_t>(bytes.size(), 1 << 20));  // header + metadata + some data
    seeds.push_back(std::move(bytes));
  }
  std::mt19937_64 rng(1234);
  const uint8_t specials[] = {0x00, 0xFF, 0x7F, 0x80, 0x01, 0x20};
  int opened = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int iter = 0; iter < 400; ++iter) {
    std::vector<uint8_t> b = seeds[iter % seeds.size()];
    const size_t hot = std::min<size_t>(b.size(), 4096);  // most structure lives up front
    const int n_mut = 1 + static_cast<int>(rng() % 8);
    for (int m = 0; m < n_mut; ++m) {
      const size_t at = (rng() % 4 == 0) ? rng() % b.size() : rng() % hot;
      switch (rng() % 3) {
        case 0:
          b[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 1:
          b[at] = specials[rng() % sizeof(specials)];
          break;
        default:
          b.resize(at + 1);
          break;
      }
    }
    const std::string path = dir + "/m.gguf";
    test::write_file_bytes(path, b);
    auto f = GgufFile::open(path, {.load_all_shards = false});
    if (f) {
      ++opened;
      for (const auto& t : (*f)->tensors()) {
        if (t.nbytes) {
          ASSERT_LE(t.nbytes, b.size());
        }
      }
    } else {
      ++failed;
      EXPECT_FALSE(f.message().empty());
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("mutations: %d opened, %d rejected, %.2f s\n", opened, failed, secs);
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace ds
