// Every tensor of every model in ../shared/refdata dequantizes to finite values, and
// the models exercise the block types the refdata README promises.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/kernels.h"
#include "test_util.h"

namespace ds {
namespace {

const char* const kModels[] = {
    "tiny-llama-Q4_K_M.gguf", "tiny-qwen2-Q5_K_S.gguf", "tiny-dsv2-Q4_K_M.gguf",
    "tiny-dsv2-legacy-Q4_K_M.gguf", "tiny-dsv3-Q4_K_M.gguf",
};

TEST(RefdataDequant, EveryTensorIsFinite) {
  std::set<std::string> seen_types;
  for (const char* m : kModels) {
    auto f = GgufFile::open(test::shared_path(std::string("refdata/") + m));
    ASSERT_TRUE(f.is_ok()) << f.message();
    ASSERT_FALSE((*f)->tensors().empty()) << m;
    for (const auto& t : (*f)->tensors()) {
      seen_types.insert(ggml_type_name(t.type));
      std::vector<float> row(static_cast<size_t>(t.ne[0]));
      double sum_sq = 0.0;
      for (int64_t r = 0; r < t.n_rows(); ++r) {
        dequantize_row(t.type, t.data + static_cast<size_t>(r) * t.row_bytes(), row.data(), t.ne[0]);
        for (float v : row) {
          ASSERT_TRUE(std::isfinite(v)) << m << " " << t.name << " row " << r;
          sum_sq += static_cast<double>(v) * v;
        }
      }
      EXPECT_GT(sum_sq, 0.0) << m << " " << t.name << " is all zeros";
    }
  }
  for (const char* want : {"F32", "Q4_K", "Q5_K", "Q6_K", "Q5_0", "Q8_0"}) {
    EXPECT_TRUE(seen_types.count(want)) << "no refdata tensor of type " << want;
  }
}

}  // namespace
}  // namespace ds
